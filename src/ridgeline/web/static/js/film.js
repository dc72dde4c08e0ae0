// The link to the film of the playground's current state (served at /film).

const KEYS = ["model", "gpu", "weights", "tp"];

export function linkFilm(state) {
  const link = document.getElementById("film-link");
  if (!link) return;
  const query = new URLSearchParams(KEYS.map((k) => [k, String(state[k])]));
  link.href = `/film?${query}`;
}
