// A small SVG line chart: lines with an optional band, axes with ticks, and a legend.
"use strict";
const COLOURS = ["#2f6fde", "#e8590c", "#2b8a3e", "#ae3ec9", "#c92a2a", "#1098ad", "#5c940d", "#862e9c"];
const pageData = JSON.parse(document.getElementById("page-data").textContent);

function svgEl(name, attrs, parent) {
  const el = document.createElementNS("http://www.w3.org/2000/svg", name);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
  if (parent) parent.appendChild(el);
  return el;
}

function ticks(lo, hi, count) {
  if (!(hi > lo)) { hi = lo + 1; }
  const raw = (hi - lo) / count, mag = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 5, 10].map(m => m * mag).find(s => s >= raw);
  const out = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(v);
  return out;
}

function fmt(v) { return Math.abs(v) >= 1e4 ? v.toExponential(1) : +v.toPrecision(4) + ""; }

function drawChart(svg, data) {
  while (svg.firstChild) svg.removeChild(svg.firstChild);
  const box = svg.getBoundingClientRect();
  const W = box.width || 800, H = box.height || 360, L = 60, R = 16, T = 14, B = 40;
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  const lines = data.lines || [];
  if (!lines.length) {
    svgEl("text", {x: W / 2, y: H / 2, "text-anchor": "middle"}, svg).textContent = "nothing recorded yet";
    return;
  }
  let x0 = Infinity, x1 = -Infinity, y0 = Infinity, y1 = -Infinity;
  for (const l of lines) {
    l.x.forEach((x, i) => {
      x0 = Math.min(x0, x); x1 = Math.max(x1, x);
      for (const y of [l.y[i], l.low && l.low[i], l.high && l.high[i]]) {
        if (y !== null && y !== undefined) { y0 = Math.min(y0, y); y1 = Math.max(y1, y); }
      }
    });
  }
  if (y1 === y0) { y0 -= 1; y1 += 1; }
  if (x1 === x0) { x1 = x0 + 1; }
  const sx = x => L + (x - x0) / (x1 - x0) * (W - L - R);
  const sy = y => T + (1 - (y - y0) / (y1 - y0)) * (H - T - B);
  const axes = svgEl("g", {}, svg);
  for (const t of ticks(y0, y1, 5)) {
    svgEl("line", {x1: L, x2: W - R, y1: sy(t), y2: sy(t), stroke: "#eaecf0"}, axes);
    svgEl("text", {x: L - 6, y: sy(t) + 4, "text-anchor": "end"}, axes).textContent = fmt(t);
  }
  for (const t of ticks(x0, x1, 8)) {
    svgEl("text", {x: sx(t), y: H - B + 16, "text-anchor": "middle"}, axes).textContent = fmt(t);
  }
  svgEl("line", {x1: L, x2: W - R, y1: H - B, y2: H - B, stroke: "#98a2b3"}, axes);
  svgEl("text", {x: (L + W - R) / 2, y: H - 6, "text-anchor": "middle"}, axes).textContent = data.x_label || "";
  svgEl("text", {x: 12, y: T + (H - T - B) / 2, transform: `rotate(-90 12 ${T + (H - T - B) / 2})`, "text-anchor": "middle"}, axes).textContent = data.y_label || "";
  lines.forEach((l, n) => {
    const colour = COLOURS[n % COLOURS.length];
    if (l.low && l.high) {
      const up = l.x.map((x, i) => `${sx(x)},${sy(l.high[i] ?? l.y[i])}`);
      const down = l.x.map((x, i) => `${sx(x)},${sy(l.low[i] ?? l.y[i])}`).reverse();
      svgEl("polygon", {points: up.concat(down).join(" "), fill: colour, opacity: 0.15}, svg);
    }
    const pts = l.x.map((x, i) => l.y[i] === null ? null : `${sx(x)},${sy(l.y[i])}`).filter(p => p);
    svgEl("polyline", {points: pts.join(" "), fill: "none", stroke: colour, "stroke-width": 1.6, class: "line", "data-points": l.x.length, "data-n": l.n}, svg);
    const ly = T + 6 + n * 16;
    svgEl("rect", {x: W - R - 230, y: ly - 8, width: 10, height: 10, fill: colour}, svg);
    svgEl("text", {x: W - R - 215, y: ly + 1}, svg).textContent = `${l.label} (${l.n.toLocaleString()} points)`;
  });
}

// The live channel: calls onRuns(ids) for every change of runs in the store.
function listen(url, handlers) {
  const dot = document.getElementById("live");
  const source = new EventSource(url);
  source.onopen = () => dot && dot.classList.add("on");
  source.onerror = () => dot && dot.classList.remove("on");
  for (const [name, fn] of Object.entries(handlers)) {
    source.addEventListener(name, ev => fn(JSON.parse(ev.data)));
  }
  return source;
}

// Fetch JSON; one request at a time per key, and a change during a request asks once more.
const busy = {};
async function refresh(key, fn) {
  if (busy[key]) { busy[key] = "again"; return; }
  busy[key] = true;
  try { await fn(); } finally {
    const again = busy[key] === "again";
    busy[key] = false;
    if (again) refresh(key, fn);
  }
}

async function getJSON(url, options) {
  const response = await fetch(url, options);
  const body = await response.json();
  if (!response.ok) throw new Error(body.error || response.statusText);
  return body;
}
