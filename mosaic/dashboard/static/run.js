// A run's page and the comparison page: the chart, and sections that follow the store live.
"use strict";
const runs = pageData.runs || [];
const chart = document.getElementById("chart");

async function drawCurves() {
  if (!chart || !runs.length) return;
  const q = new URLSearchParams({runs: runs.join(","), metric: document.getElementById("metric").value,
    x: document.getElementById("xaxis").value, smooth: document.getElementById("smooth").value || 1});
  drawChart(chart, await getJSON("/api/curves?" + q));
  chart.dataset.drawn = String(Number(chart.dataset.drawn || 0) + 1);
}

async function drawSections() {
  if (runs.length !== 1 || !document.getElementById("summary")) return;
  const data = await getJSON(`/api/runs/${runs[0]}/sections`);
  for (const part of ["summary", "failure", "transitions", "episodes"]) {
    document.getElementById(part).innerHTML = data[part];
  }
}

for (const id of ["metric", "xaxis", "smooth"]) {
  const el = document.getElementById(id);
  if (el) el.addEventListener("change", () => refresh("curves", drawCurves));
}
window.addEventListener("resize", () => refresh("curves", drawCurves));
listen("/api/events", {runs: msg => {
  if (!msg.ids.some(id => runs.includes(id))) return;
  refresh("sections", drawSections);
  refresh("curves", drawCurves);
}});
if (pageData.chart && chart) {  // the page came with its curve: draw it without asking
  drawChart(chart, pageData.chart);
  chart.dataset.drawn = "1";
} else {
  refresh("curves", drawCurves);
}
