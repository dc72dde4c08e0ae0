// Units for display only: every value arrives computed by the server.

// Three significant figures without trailing zeros, like Python's "{:.3g}".
export function g3(x) {
  return String(Number(x.toPrecision(3)));
}

export function seconds(s) {
  if (s >= 1) return `${g3(s)} s`;
  if (s >= 1e-3) return `${g3(s * 1e3)} ms`;
  return `${g3(s * 1e6)} µs`;
}

// A band of two times, as the command line writes it: "42–57 ms", or "980 ms–1.2 s".
export function span(lo, hi) {
  const [a, unitA] = seconds(lo).split(" ");
  const [b, unitB] = seconds(hi).split(" ");
  return unitA === unitB ? `${a}–${b} ${unitB}` : `${seconds(lo)}–${seconds(hi)}`;
}

export function whole(x) {
  return Math.round(x).toLocaleString("en-US");
}

export function oneDecimal(x) {
  return x.toLocaleString("en-US", { minimumFractionDigits: 1, maximumFractionDigits: 1 });
}

// Decimal bytes: GB from a gigabyte up, MB below.
export function gigabytes(bytes) {
  return bytes >= 1e9 ? `${g3(bytes / 1e9)} GB` : `${g3(bytes / 1e6)} MB`;
}

export function si(value, unit = "") {
  const prefixes = [[1e15, "P"], [1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"]];
  for (const [factor, prefix] of prefixes) {
    if (Math.abs(value) >= factor) return `${g3(value / factor)} ${prefix}${unit}`;
  }
  return `${g3(value)} ${unit}`.trim();
}

export function percent(share) {
  return `${Math.round(share * 100)}%`;
}
