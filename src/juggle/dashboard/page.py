"""The dashboard's single HTML page: self-contained (no external assets), it polls the JSON API.

The page shows services (with buttons to move each between tiers), regions, the measured call
statistics of every service and the last juggles with their modeled and measured figures. It
builds every cell with ``textContent``, so names coming from modules are never parsed as HTML.
"""

from __future__ import annotations

__all__ = ["PAGE"]

PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>juggle dashboard</title>
<style>
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.3em; } h2 { font-size: 1.05em; margin-top: 1.4em; }
table { border-collapse: collapse; margin: .4em 0; }
th, td { border: 1px solid #ccc; padding: .25em .6em; text-align: left; font-size: .9em; }
th { background: #f2f2f2; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.kind { color: #666; font-size: .8em; }
#status { color: #666; font-size: .85em; }
.error { color: #b00; }
button { font-size: .8em; margin-right: .2em; }
</style>
</head>
<body>
<h1>juggle dashboard</h1>
<div id="status">loading...</div>
<div id="notice" class="error"></div>
<p><button id="workload" onclick="toggleWorkload()">workload: ...</button>
<span id="workload-status"></span></p>
<h2>services</h2>
<table id="services"><thead><tr>
<th>id</th><th>interface</th><th>tier</th><th>region</th><th>module</th><th>consumers</th>
<th>move to</th></tr></thead><tbody></tbody></table>
<h2>regions</h2>
<table id="regions"><thead><tr>
<th>region</th><th>state</th><th>design</th><th>service</th><th>module</th><th>slices</th>
</tr></thead><tbody></tbody></table>
<h2>call statistics <span class="kind">(measured, wall clock of the host)</span></h2>
<table id="statistics"><thead><tr>
<th>service</th><th>tier</th><th>calls</th><th>calls/s</th><th>mean &micro;s</th>
<th>p50 &micro;s</th><th>p99 &micro;s</th><th>in flight</th></tr></thead><tbody></tbody></table>
<h2>last juggles</h2>
<table id="juggles"><thead><tr>
<th>to hardware</th><th>to software</th><th>region</th>
<th>reconfiguration ms <span class="kind">(modeled)</span></th>
<th>bridge ms <span class="kind">(modeled)</span></th>
<th>overhead &micro;s <span class="kind">(measured)</span></th></tr></thead><tbody></tbody></table>
<script>
"use strict";
function cell(row, value, numeric) {
  const td = document.createElement("td");
  td.textContent = value === null || value === undefined ? "-" : String(value);
  if (numeric) td.className = "num";
  row.appendChild(td);
  return td;
}
function fill(id, items, build) {
  const body = document.querySelector("#" + id + " tbody");
  body.replaceChildren();
  for (const item of items) {
    const row = document.createElement("tr");
    build(row, item);
    body.appendChild(row);
  }
}
function status(text, bad) {
  const el = document.getElementById("status");
  el.textContent = text;
  el.className = bad ? "error" : "";
}
async function getJson(url) {
  const response = await fetch(url);
  const body = await response.json();
  if (!response.ok) throw new Error(body.error || response.statusText);
  return body;
}
async function setTier(id, tier) {
  const token = new URLSearchParams(location.hash.slice(1)).get("token") || "";
  const response = await fetch("/api/services/" + id + "/tier", {
    method: "POST",
    headers: {"Content-Type": "application/json", "Authorization": "Bearer " + token},
    body: JSON.stringify({tier: tier})});
  const body = await response.json();
  document.getElementById("notice").textContent = response.ok ? "" : "error: " + body.error;
  refresh();
}
async function post(url, payload) {
  const token = new URLSearchParams(location.hash.slice(1)).get("token") || "";
  const response = await fetch(url, {
    method: "POST",
    headers: {"Content-Type": "application/json", "Authorization": "Bearer " + token},
    body: JSON.stringify(payload)});
  const body = await response.json();
  document.getElementById("notice").textContent = response.ok ? "" : "error: " + body.error;
  return body;
}
let workloadRunning = false;
async function toggleWorkload() {
  await post("/api/workload", {on: !workloadRunning});
  refresh();
}
function showWorkload(w) {
  workloadRunning = w.running;
  document.getElementById("workload").textContent =
    w.running ? "stop the workload" : "start the workload";
  const calls = Object.entries(w.calls).map(([c, n]) => c + " " + n).join(", ");
  document.getElementById("workload-status").textContent =
    (w.running ? "running: " : "stopped: ") + (calls || "no calls") +
    (w.failed ? ", failed " + w.failed : "");
}
function fixed(value, digits) { return Number(value).toFixed(digits); }
async function refresh() {
  try {
    const [services, regions, juggles, workload] = await Promise.all([
      getJson("/api/services"), getJson("/api/regions"), getJson("/api/juggles?limit=10"),
      getJson("/api/workload")]);
    showWorkload(workload);
    const stats = await Promise.all(services.map(
      s => getJson("/api/services/" + s.service_id + "/statistics").catch(() => null)));
    fill("services", services, (row, s) => {
      cell(row, s.service_id, true); cell(row, s.interface); cell(row, s.tier);
      cell(row, s.region); cell(row, s.module); cell(row, s.consumers.join(", "));
      const td = cell(row, "");
      for (const tier of s.tiers) {
        if (tier === s.tier) continue;
        const button = document.createElement("button");
        button.textContent = tier;
        button.onclick = () => setTier(s.service_id, tier);
        td.appendChild(button);
      }
    });
    fill("regions", regions, (row, r) => {
      cell(row, r.name); cell(row, r.state); cell(row, r.design);
      cell(row, r.service_id); cell(row, r.module); cell(row, r.resources.slices, true);
    });
    fill("statistics", stats.filter(s => s !== null), (row, s) => {
      cell(row, s.service_id + " " + s.interface); cell(row, s.tier);
      cell(row, s.total.calls, true); cell(row, fixed(s.rate_per_s, 1), true);
      cell(row, fixed(s.total.mean_us, 1), true); cell(row, fixed(s.total.p50_us, 1), true);
      cell(row, fixed(s.total.p99_us, 1), true); cell(row, s.inflight, true);
    });
    fill("juggles", juggles.reverse(), (row, j) => {
      cell(row, j.to_hardware); cell(row, j.to_software.join(", ")); cell(row, j.region);
      cell(row, fixed(j.reconfiguration_ms, 3), true); cell(row, fixed(j.bridge_ms, 3), true);
      cell(row, fixed(j.overhead_us, 1), true);
    });
    status("updated " + new Date().toLocaleTimeString(), false);
  } catch (err) {
    status("cannot reach the runtime: " + err.message, true);
  }
}
refresh();
setInterval(refresh, 1000);
</script>
</body>
</html>
"""
