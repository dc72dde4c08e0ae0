// The JSON API: every number the page shows comes from here.

export class ApiError extends Error {}

async function getJson(path, params) {
  const query = params ? `?${new URLSearchParams(params)}` : "";
  const response = await fetch(`${path}${query}`, { headers: { Accept: "application/json" } });
  const body = await response.json();
  if (!response.ok) throw new ApiError(typeof body.detail === "string" ? body.detail : response.statusText);
  return body;
}

export const api = {
  playground: (state) => getJson("/api/playground", state),
  models: () => getJson("/api/models"),
  lesson: () => getJson("/api/lesson"),
  step: (n) => getJson(`/api/lesson/${n}`),
  check: (n, answer) => getJson(`/api/lesson/${n}/check`, { answer: String(answer) }),
};
