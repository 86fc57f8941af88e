// The runs page: search, pick runs to compare, and rows that follow the store live.
"use strict";
const table = document.querySelector("#runs tbody");
const search = document.getElementById("search");
const compare = document.getElementById("compare");

function applySearch() {
  const words = search.value.toLowerCase().split(/\s+/).filter(w => w);
  let shown = 0;
  const experiments = {};
  for (const row of table.querySelectorAll("tr[data-run]")) {
    const hit = words.every(w => row.dataset.search.includes(w));
    row.classList.toggle("hidden", !hit);
    if (hit) { shown++; experiments[row.dataset.experiment] = true; }
  }
  for (const row of table.querySelectorAll("tr.experiment")) {
    row.classList.toggle("hidden", !experiments[row.dataset.experiment]);
  }
  document.getElementById("shown").textContent = `${shown} of ${table.querySelectorAll("tr[data-run]").length} runs`;
}

function picked() { return [...table.querySelectorAll("input.pick:checked")].map(b => b.value); }
table.addEventListener("change", () => { compare.disabled = picked().length === 0; });
compare.addEventListener("click", () => { location.href = "/compare?runs=" + picked().join(","); });
search.addEventListener("input", applySearch);

async function update(ids) {
  const data = await getJSON("/api/runs/rows?ids=" + ids.join(","));
  for (const [id, html] of Object.entries(data.rows)) {
    const holder = document.createElement("tbody");
    holder.innerHTML = html;
    const row = holder.firstElementChild;
    const old = table.querySelector(`tr[data-run="${id}"]`);
    if (old) {
      row.querySelector("input.pick").checked = old.querySelector("input.pick").checked;
      old.replaceWith(row);
    } else {
      const experiment = data.experiments[id];
      if (!table.querySelector(`tr.experiment[data-experiment="${CSS.escape(experiment)}"]`)) {
        const head = document.createElement("tr");
        head.className = "experiment"; head.dataset.experiment = experiment;
        head.innerHTML = `<td colspan="12"></td>`; head.firstChild.textContent = experiment;
        table.appendChild(head);
      }
      const rows = table.querySelectorAll(`tr[data-experiment="${CSS.escape(experiment)}"]`);
      rows[rows.length - 1].after(row);
    }
    row.classList.add("flash");
  }
  applySearch();
}

let pending = new Set();
listen("/api/events", {runs: msg => {
  msg.ids.forEach(id => pending.add(id));
  refresh("rows", async () => { const ids = [...pending]; pending = new Set(); if (ids.length) await update(ids); });
}});
applySearch();
