// The runs page: search, pick runs to compare, and rows that follow the store live.
"use strict";
const table = document.getElementById("runs");
const search = document.getElementById("search");
const compare = document.getElementById("compare");

// A row's text (and its digest's full value), lower-cased once, when first searched.
const texts = new WeakMap();
function textOf(row) {
  if (!texts.has(row)) {
    const digest = row.querySelector(".mono").title;
    const cells = [...row.children].map(c => c.textContent);
    texts.set(row, [...cells, digest, row.dataset.experiment].join(" ").toLowerCase());
  }
  return texts.get(row);
}

function applySearch() {
  const words = search.value.toLowerCase().split(/\s+/).filter(w => w);
  const rows = table.querySelectorAll(".row[data-run]");
  document.getElementById("shown").textContent = `${rows.length} runs`;
  if (!words.length && !table.querySelector(".row.hidden")) return;
  let shown = 0;
  const experiments = {};
  for (const row of rows) {
    const hit = words.every(w => textOf(row).includes(w));
    row.classList.toggle("hidden", !hit);
    if (hit) { shown++; experiments[row.dataset.experiment] = true; }
  }
  for (const row of table.querySelectorAll(".row.experiment")) {
    row.classList.toggle("hidden", !experiments[row.dataset.experiment]);
  }
  document.getElementById("shown").textContent = `${shown} of ${rows.length} runs`;
}

function picked() { return [...table.querySelectorAll("input.pick:checked")].map(b => b.value); }
table.addEventListener("change", () => { compare.disabled = picked().length === 0; });
compare.addEventListener("click", () => { location.href = "/compare?runs=" + picked().join(","); });
search.addEventListener("input", applySearch);

async function update(ids) {
  const data = await getJSON("/api/runs/rows?ids=" + ids.join(","));
  for (const [id, html] of Object.entries(data.rows)) {
    const holder = document.createElement("div");
    holder.innerHTML = html;
    const row = holder.firstElementChild;
    const old = table.querySelector(`.row[data-run="${id}"]`);
    if (old) {
      row.querySelector("input.pick").checked = old.querySelector("input.pick").checked;
      row.classList.toggle("hidden", old.classList.contains("hidden"));
      old.replaceWith(row);
    } else {
      const experiment = data.experiments[id];
      if (!table.querySelector(`.row.experiment[data-experiment="${CSS.escape(experiment)}"]`)) {
        const head = document.createElement("div");
        head.className = "row experiment"; head.dataset.experiment = experiment;
        head.innerHTML = "<div></div>"; head.firstChild.textContent = experiment;
        table.appendChild(head);
      }
      const rows = table.querySelectorAll(`.row[data-experiment="${CSS.escape(experiment)}"]`);
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
