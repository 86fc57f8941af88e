// Manual mode: one panel per operator; commands are posted, snapshots arrive live.
"use strict";
const base = `/api/manual/${pageData.index}`;
const panels = document.getElementById("panels");
const message = document.getElementById("message");

function el(tag, attrs, text) {
  const e = document.createElement(tag);
  Object.entries(attrs || {}).forEach(([k, v]) => e.setAttribute(k, v));
  if (text !== undefined) e.textContent = text;
  return e;
}

let shown = -1;  // the version on screen: a snapshot seen twice (reply and live) draws once
function render(snap) {
  if (snap.version <= shown) return;
  shown = snap.version;
  document.getElementById("shared").textContent = snap.state === "open"
    ? `episode ${snap.episode}, shared seed ${snap.seed}` : snap.state;
  document.body.dataset.state = snap.state;
  document.body.dataset.version = snap.version;
  for (const id of ["step", "stepn", "reset", "close"]) document.getElementById(id).disabled = snap.state !== "open";
  document.getElementById("open").disabled = snap.state !== "closed";
  panels.innerHTML = "";
  for (const op of snap.operators) {
    const panel = el("div", {class: "panel" + (op.players ? " game" : "") + (op.status === "failed" ? " failed" : ""), "data-operator": op.operator_id});
    const title = el("h3");
    title.appendChild(el("span", {}, op.display_name));
    title.appendChild(el("span", {class: "badge status st-" + op.status.replace(/ /g, "-")}, op.status));
    panel.appendChild(title);
    if (op.render_png) panel.appendChild(el("img", {src: "data:image/png;base64," + op.render_png, alt: op.operator_id}));
    else if (op.render_text) panel.appendChild(el("pre", {}, op.render_text));
    const facts = el("div", {class: "facts"});
    const rows = [["type", op.operator_type], ["episode", `${op.episode_index ?? "–"} (seed ${op.seed ?? "–"})`],
      ["step", op.steps], ["last action", op.last_action === null ? "–" : JSON.stringify(op.last_action)],
      ["reward", op.last_reward ?? "–"], ["return", op.episode_return]];
    for (const [k, v] of rows) { facts.appendChild(el("span", {}, k)); facts.appendChild(el("strong", {class: k.replace(/ /g, "-")}, String(v))); }
    panel.appendChild(facts);
    if (op.players) {
      panel.appendChild(playersTable(op.players));
      for (const pl of op.players) if (pl.moves && op.status !== "failed") panel.appendChild(moveForm(op, pl));
    }
    if (op.failure) panel.appendChild(el("div", {class: "failure"}, op.failure));
    if (op.actions && op.status !== "failed") {
      const buttons = el("div", {class: "actions"});
      for (const [index, name] of op.actions) {
        const b = el("button", {"data-action": index}, name === String(index) ? name : `${index} ${name}`);
        b.disabled = op.status !== "your move";
        b.addEventListener("click", () => send("act", {operator: op.operator_id, action: index}));
        buttons.appendChild(b);
      }
      panel.appendChild(buttons);
    }
    panels.appendChild(panel);
  }
}

// A game's players: who is to move, each one's worker, last move, return and LLM fallbacks.
function playersTable(players) {
  const table = el("table", {class: "players"});
  const head = el("tr");
  for (const k of ["", "player", "operator", "type", "last move", "return", "actions", "fallbacks"]) head.appendChild(el("th", {}, k));
  table.appendChild(head);
  for (const pl of players) {
    const row = el("tr", {"data-player": pl.player, class: pl.to_act ? "to-act" : ""});
    const last = pl.last_move ?? (pl.last_action === null ? "–" : JSON.stringify(pl.last_action));
    const cells = [[pl.to_act ? "▶" : "", "turn"], [pl.player, "player"], [pl.display_name, "name"], [pl.operator_type, "type"],
      [last, "last-move"], [pl.episode_return, "return"], [pl.actions, "n-actions"], [pl.fallbacks ?? "–", "fallbacks"]];
    for (const [v, k] of cells) row.appendChild(el("td", {class: k}, String(v)));
    table.appendChild(row);
  }
  return table;
}

// A human player's move: a field (a legal move's name, UCI in chess, or an index) and, when
// there are few enough, a button per legal move.
const MOVE_BUTTONS = 48;
function moveForm(op, pl) {
  const form = el("form", {class: "move", "data-player": pl.player});
  const list = `moves-${op.operator_id}-${pl.player}`;
  form.appendChild(el("label", {for: list + "-field"}, `${pl.display_name} to move`));
  const field = el("input", {id: list + "-field", name: "move", list, autocomplete: "off", placeholder: `e.g. ${pl.moves[0][1]}`});
  const names = el("datalist", {id: list});
  for (const [, name] of pl.moves) names.appendChild(el("option", {value: name}));
  form.appendChild(field);
  form.appendChild(names);
  form.appendChild(el("button", {type: "submit"}, "Play"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    send("play", {operator: op.operator_id, player: pl.player, move: field.value});
  });
  if (pl.moves.length <= MOVE_BUTTONS) {
    const buttons = el("div", {class: "actions"});
    for (const [, name] of pl.moves) {
      const b = el("button", {type: "button", "data-move": name}, name);
      b.addEventListener("click", () => send("play", {operator: op.operator_id, player: pl.player, move: name}));
      buttons.appendChild(b);
    }
    form.appendChild(buttons);
  }
  return form;
}

async function send(command, body) {
  message.textContent = "";
  try {
    const response = await fetch(`${base}/${command}`, {method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify(body || {})});
    const snap = await response.json();
    if (snap.error) message.textContent = snap.error;
    if (snap.operators) render(snap);
  } catch (e) { message.textContent = String(e); }
}

document.getElementById("open").onclick = () => send("open");
document.getElementById("close").onclick = () => send("close");
document.getElementById("step").onclick = () => send("step", {n: 1});
document.getElementById("stepn").onclick = () => send("step", {n: Number(document.getElementById("n").value)});
document.getElementById("reset").onclick = () => {
  const seed = document.getElementById("seed").value;
  send("reset", seed === "" ? {} : {seed: Number(seed)});
};
listen(`${base}/events`, {snapshot: render});
