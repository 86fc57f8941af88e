// Episode replay: frames re-simulated on the server, played here; the digests say if it matches.
"use strict";
(async () => {
  const verdict = document.getElementById("verdict");
  const q = new URLSearchParams({environment: pageData.environment, episode: pageData.episode});
  let data;
  try { data = await getJSON(`/api/runs/${pageData.run}/replay?` + q); }
  catch (e) { verdict.textContent = "cannot replay: " + e.message; verdict.className = "verdict bad"; return; }
  verdict.className = "verdict " + (data.same ? "ok" : "bad");
  verdict.innerHTML = "";
  const lines = [
    data.same ? `Same episode: the re-simulation (seed ${data.seed}, ${data.actions.length} stored actions) gives digest ${data.replayed_digest}, as the stored steps do.`
              : `Different episode: stored digest ${data.stored_digest}, re-simulated ${data.replayed_digest}; first difference at step ${data.mismatch_at}.`,
    `Run digest ${data.run_digest || "–"}: ${data.run_check}.`];
  for (const text of lines) { const p = document.createElement("div"); p.textContent = text; verdict.appendChild(p); }
  const img = document.getElementById("frame"), pos = document.getElementById("position");
  const where = document.getElementById("where"), play = document.getElementById("play");
  pos.max = data.frames.length - 1;
  function show(i) {
    img.src = "data:image/png;base64," + data.frames[i];
    pos.value = i;
    where.textContent = i === 0 ? `reset (seed ${data.seed})` :
      `step ${i}/${data.actions.length}: action ${JSON.stringify(data.actions[i - 1])}, reward ${data.rewards[i - 1]}`;
  }
  let timer = null;
  play.addEventListener("click", () => {
    if (timer) { clearInterval(timer); timer = null; play.textContent = "Play"; return; }
    play.textContent = "Pause";
    timer = setInterval(() => {
      const next = Number(pos.value) + 1;
      if (next >= data.frames.length) { clearInterval(timer); timer = null; play.textContent = "Play"; return; }
      show(next);
    }, 50);
  });
  pos.addEventListener("input", () => show(Number(pos.value)));
  show(0);
})();
