/* AIPerf dashboard: one script for every page (body[data-page]); charts drawn with uPlot.
 *
 * Data comes from the URL templates in the page's #dash-config JSON (aiperf.dashboard.DataSource).
 * Each chart element gets data-points (points drawn, all series) and data-series once drawn,
 * so tests and people can check what a chart holds.
 */
"use strict";

const CFG = JSON.parse(document.getElementById("dash-config").textContent);
const SUMMARY = "profile_export_aiperf.json";
const RECORDS = "profile_export.jsonl";
const SERVER_METRICS = "server_metrics_export.json";
const SWEEP_SUMMARY = "profile_export_aiperf_sweep.json";
/** The per-combination columns of the sweep page: [metric, statistic] means over the trials. */
const SWEEP_COLUMNS = [["request_throughput", "avg"], ["request_latency", "avg"], ["request_latency", "p99"],
  ["time_to_first_token", "avg"], ["inter_token_latency", "avg"], ["output_token_throughput", "avg"]];
const TERMINAL = new Set(["done", "failed", "cancelled", "Completed", "Failed", "Cancelled"]);
const PERCENTILES = ["p1", "p5", "p10", "p25", "p50", "p75", "p90", "p95", "p99"];
const THROUGHPUT_BINS = 20;
const COLORS = ["#2563eb", "#dc6803", "#067647", "#7a2e98", "#b42318", "#0e7090"];
const DIST = [
  ["ttft", "time_to_first_token", "TTFT (ms)"],
  ["itl", "inter_token_latency", "ITL (ms)"],
  ["latency", "request_latency", "latency (ms)"],
];

// -- helpers -----------------------------------------------------------------------------------

function fill(template, params) {
  return template.replace(/\{(\w+)\}/g, (_, key) => encodeURIComponent(params[key] ?? ""));
}

function wsUrl(path) {
  if (/^wss?:/.test(path)) return path;
  const u = new URL(path, location.href);
  u.protocol = u.protocol === "https:" ? "wss:" : "ws:";
  return u.href;
}

async function getJson(url) {
  const r = await fetch(url, { cache: "no-store" });
  if (!r.ok) throw Object.assign(new Error(`GET ${url}: HTTP ${r.status}`), { status: r.status });
  return r.json();
}

async function getText(url) {
  const r = await fetch(url, { cache: "no-store" });
  if (!r.ok) throw new Error(`GET ${url}: HTTP ${r.status}`);
  return r.text();
}

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") node.className = v;
    else if (k === "dataset") Object.assign(node.dataset, v);
    else node.setAttribute(k, v);
  }
  for (const c of children) node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return node;
}

function fmt(v) {
  if (v === null || v === undefined || v === "") return "\u2013";
  if (typeof v !== "number") return String(v);
  if (Number.isInteger(v)) return String(v);
  return Math.abs(v) >= 100 ? v.toFixed(1) : v.toPrecision(4);
}

function showError(err) {
  const p = document.getElementById("error");
  p.hidden = false;
  p.textContent = String(err && err.message ? err.message : err);
}

function params() {
  return Object.fromEntries(new URLSearchParams(location.search));
}

function crumbs(...links) {
  const c = document.getElementById("crumbs");
  for (const [text, href] of links) c.append(" / ", href ? el("a", { href }, text) : text);
}

function jobHref(ns, name) {
  return `${CFG.base}/job?ns=${encodeURIComponent(ns)}&name=${encodeURIComponent(name)}`;
}

function sweepHref(ns, name) {
  return `${CFG.base}/sweep?ns=${encodeURIComponent(ns)}&name=${encodeURIComponent(name)}`;
}

function runHref(ns, name, epoch) {
  return `${jobHref(ns, name).replace("/job?", "/run?")}&epoch=${encodeURIComponent(epoch)}`;
}

function phaseCell(td, phase) {
  td.textContent = phase || "\u2013";
  for (const c of [...td.classList]) if (c.startsWith("phase-")) td.classList.remove(c);
  if (phase) td.classList.add(`phase-${phase}`);
  td.dataset.phase = phase || "";
}

function progressBar(done, expected) {
  const bar = el("span", { class: "bar" }, el("span"));
  const pct = expected ? Math.min(100, (100 * done) / expected) : 0;
  bar.firstChild.style.width = `${pct.toFixed(1)}%`;
  return bar;
}

/** The progress entry of the phase that matters most (profiling over warmup). */
function mainProgress(progress) {
  if (!progress) return null;
  for (const phase of ["profiling", "warmup", ...Object.keys(progress)]) {
    if (progress[phase]) return [phase, progress[phase]];
  }
  return null;
}

// -- data --------------------------------------------------------------------------------------

function parseJsonl(text) {
  const out = [];
  for (const line of text.split("\n")) if (line.trim()) out.push(JSON.parse(line));
  return out;
}

function metricValues(records, tag) {
  const out = [];
  for (const r of records) {
    const m = r.metrics && r.metrics[tag];
    if (m && typeof m.value === "number") out.push(m.value);
  }
  return out;
}

/** [sorted values, cumulative percent] of `values`: one point per value. */
function cdf(values) {
  const xs = [...values].sort((a, b) => a - b);
  return [xs, xs.map((_, i) => (100 * (i + 1)) / xs.length)];
}

/** Completed requests per second in THROUGHPUT_BINS equal bins from the first request's start
 * to the last one's end: [bin mid-times (s), requests/s]. Errors are not counted. */
function throughput(records) {
  const ok = records.filter((r) => !r.error && r.metadata);
  if (!ok.length) return [[], []];
  const start = Math.min(...ok.map((r) => r.metadata.request_start_ns));
  const end = Math.max(...ok.map((r) => r.metadata.request_end_ns));
  const width = Math.max(end - start, 1) / THROUGHPUT_BINS;
  const counts = new Array(THROUGHPUT_BINS).fill(0);
  for (const r of ok) {
    counts[Math.min(THROUGHPUT_BINS - 1, Math.floor((r.metadata.request_end_ns - start) / width))] += 1;
  }
  const xs = counts.map((_, i) => ((i + 0.5) * width) / 1e9);
  return [xs, counts.map((c) => c / (width / 1e9))];
}

function errorsByType(records) {
  const counts = new Map();
  for (const r of records) {
    if (!r.error) continue;
    const key = [r.error.code, r.error.type].filter((x) => x !== null && x !== undefined).join(" ") || "unknown";
    counts.set(key, (counts.get(key) || 0) + 1);
  }
  return [...counts.entries()].sort((a, b) => b[1] - a[1]);
}

async function loadRun(ns, name, epoch, files) {
  const has = new Set((files || []).map((f) => f.name));
  const at = (file) => fill(CFG.fileUrl, { ns, name, epoch, file });
  const [summary, records, serverMetrics] = await Promise.all([
    has.has(SUMMARY) ? getJson(at(SUMMARY)) : null,
    has.has(RECORDS) ? getText(at(RECORDS)).then(parseJsonl) : [],
    has.has(SERVER_METRICS) ? getJson(at(SERVER_METRICS)) : null,
  ]);
  return { epoch, summary, records, serverMetrics };
}

async function runsOf(ns, name) {
  return (await getJson(fill(CFG.runsUrl, { ns, name }))).runs || [];
}

// -- charts ------------------------------------------------------------------------------------

/** Draw `data` (uPlot's aligned [xs, ys...]) in `node`; `points` is what the series hold. */
function chart(node, { data, labels, xLabel, yLabel, points, bars = false, xValues = null }) {
  node.replaceChildren();
  node.dataset.points = String(points);
  node.dataset.series = String(labels.length);
  if (!points) {
    node.append(el("div", { class: "empty" }, "no data"));
    node.dataset.rendered = "empty";
    return;
  }
  const width = Math.max(320, node.clientWidth || 420);
  const series = [{ label: xLabel }];
  labels.forEach((label, i) => {
    const s = { label, stroke: COLORS[i % COLORS.length], width: 2, spanGaps: true };
    if (bars) {
      s.fill = COLORS[i % COLORS.length] + "99";
      s.paths = uPlot.paths.bars({ size: [0.6, 60] });
      s.points = { show: false };
    }
    series.push(s);
  });
  const xAxis = { label: xLabel };
  if (xValues) xAxis.values = (_, ticks) => ticks.map((t) => xValues[t] ?? "");
  new uPlot({
    width, height: 240, series,
    scales: { x: { time: false, ...(bars ? { range: [-0.5, data[0].length - 0.5] } : {}) } },
    axes: [xAxis, { label: yLabel }],
    legend: { show: labels.length > 1 || bars === false },
  }, data, node);
  node.dataset.rendered = "chart";
}

function cdfChart(node, runs, tag, xLabel) {
  const tables = runs.map((r) => cdf(metricValues(r.records, tag)));
  const points = tables.reduce((n, t) => n + t[0].length, 0);
  const usable = tables.filter((t) => t[0].length);
  const data = usable.length > 1 ? uPlot.join(usable) : usable[0] || [[]];
  const labels = runs.filter((_, i) => tables[i][0].length).map((r) => String(r.epoch));
  chart(node, { data, labels, xLabel, yLabel: "% of requests", points });
}

function throughputChart(node, runs) {
  const tables = runs.map((r) => throughput(r.records));
  const points = tables.reduce((n, t) => n + t[0].length, 0);
  const usable = tables.filter((t) => t[0].length);
  const data = usable.length > 1 ? uPlot.join(usable) : usable[0] || [[]];
  const labels = runs.filter((_, i) => tables[i][0].length).map((r) => String(r.epoch));
  chart(node, { data, labels, xLabel: "time since start (s)", yLabel: "requests/s", points });
}

// -- pages -------------------------------------------------------------------------------------

async function indexPage() {
  const body = document.querySelector("#jobs tbody");
  let timer = null;
  async function refresh() {
    let items;
    try {
      items = (await getJson(CFG.jobsUrl)).jobs || [];
    } catch (err) {
      showError(err);
      return;
    }
    body.replaceChildren();
    document.getElementById("jobs-empty").hidden = items.length > 0;
    for (const job of items) {
      const phase = el("td", { class: "phase" });
      phaseCell(phase, job.phase);
      const prog = el("td", { class: "progress" });
      const p = job.progress;
      if (p) prog.append(progressBar(p.completed, p.expected), ` ${p.completed}/${p.expected ?? "?"}`, p.errors ? ` (${p.errors} errors)` : "");
      else prog.textContent = "\u2013";
      body.append(el("tr", { dataset: { ns: job.namespace, name: job.name } },
        el("td", {}, job.namespace),
        el("td", {}, el("a", { href: jobHref(job.namespace, job.name) }, job.name)),
        el("td", { class: "num" }, fmt(job.runCount)),
        el("td", {}, job.latestEpoch ? el("a", { href: runHref(job.namespace, job.name, job.latestEpoch) }, String(job.latestEpoch)) : "\u2013"),
        phase, prog));
    }
    const live = items.some((j) => j.progress && !TERMINAL.has(j.phase));
    clearTimeout(timer);
    if (live) timer = setTimeout(refresh, CFG.pollIntervalS * 1000);
  }
  await refresh();
  if (CFG.sweepsUrl) await listSweeps();
}

/** The index page's sweep list (stored sweep aggregates), shown only when there are some. */
async function listSweeps() {
  const sweeps = (await getJson(CFG.sweepsUrl)).sweeps || [];
  document.getElementById("sweeps-section").hidden = sweeps.length === 0;
  const body = document.querySelector("#sweeps tbody");
  body.replaceChildren();
  for (const sweep of sweeps) {
    const phase = el("td", { class: "phase" });
    phaseCell(phase, sweep.phase);
    body.append(el("tr", { dataset: { ns: sweep.namespace, name: sweep.name } },
      el("td", {}, sweep.namespace),
      el("td", {}, el("a", { href: sweepHref(sweep.namespace, sweep.name) }, sweep.name)),
      el("td", { class: "num" }, fmt(sweep.runCount)), el("td", {}, fmt(sweep.latestEpoch)), phase));
  }
}

/** A sweep's page: the per-combination table of its newest stored aggregate, and every stored
 * aggregate with its files (download links). */
async function sweepPage() {
  const { ns, name } = params();
  document.getElementById("sweep-title").textContent = `sweep ${ns}/${name}`;
  crumbs([`sweep ${ns}/${name}`]);
  const runs = (await getJson(fill(CFG.sweepRunsUrl, { ns, name }))).runs || [];
  if (runs.length === 0) throw new Error(`no stored aggregate of sweep ${ns}/${name}`);
  const fileUrl = (epoch, file) => fill(CFG.sweepFileUrl, { ns, name, epoch, file });
  const body = document.querySelector("#aggregates tbody");
  for (const run of runs) {
    const files = el("td", { class: "files" });
    for (const f of run.files || []) files.append(el("a", { href: fileUrl(run.epoch, f.name), download: f.name }, f.name), " ");
    const phase = el("td", { class: "phase" });
    phaseCell(phase, run.phase);
    body.append(el("tr", { dataset: { epoch: String(run.epoch) } }, el("td", {}, String(run.epoch)), phase,
      el("td", {}, fmt(run.completedAt)), files));
  }
  const newest = runs[0];
  if (!(newest.files || []).some((f) => f.name === SWEEP_SUMMARY)) throw new Error(`aggregate ${newest.epoch} has no ${SWEEP_SUMMARY}`);
  const doc = await getJson(fileUrl(newest.epoch, SWEEP_SUMMARY));
  document.getElementById("sweep-epoch").textContent = `(aggregate ${newest.epoch}, ${doc.sweep_type || "grid"})`;
  const front = new Set((doc.pareto_optimal || []).map((p) => p.label));
  const table = document.querySelector("#combinations tbody");
  for (const combo of doc.per_combination_metrics || []) {
    const cells = SWEEP_COLUMNS.map(([tag, stat]) => (((combo.metrics || {})[tag] || {})[stat] || {}).mean);
    table.append(el("tr", { dataset: { label: combo.label } }, el("td", {}, combo.label),
      el("td", { class: "num" }, fmt(combo.num_successful_runs)),
      ...cells.map((c) => el("td", { class: "num" }, fmt(c))), el("td", {}, front.has(combo.label) ? "\u2713" : "")));
  }
  const best = doc.best_configurations || {};
  document.getElementById("best").textContent = [["best_throughput", "best throughput"], ["best_latency_p99", "best p99 latency"]]
    .filter(([key]) => best[key]).map(([key, text]) => `${text}: ${best[key].label} (${fmt(best[key].value)})`).join("; ");
}

async function jobPage() {
  const { ns, name } = params();
  document.getElementById("job-title").textContent = `${ns}/${name}`;
  crumbs([`${ns}/${name}`]);
  const phaseTd = document.getElementById("phase");
  const live = document.getElementById("live");
  let phase = "";

  function setLive(mode, text) {
    live.dataset.live = mode;
    live.textContent = text;
  }

  function render(snapshot) {
    phase = snapshot.jobPhase || snapshot.phase || snapshot.state || phase;
    phaseCell(phaseTd, phase);
    const latest = document.querySelector("#runs tbody tr td.phase");
    if (latest && snapshot.progress) phaseCell(latest, phase);  // the newest run is the live one
    const body = document.querySelector("#progress tbody");
    body.replaceChildren();
    for (const [name, p] of Object.entries(snapshot.progress || {})) {
      const started = ((snapshot.phases || {})[name] || {}).started || {};
      const expected = p.expected ?? started.expected_credits ?? null;
      body.append(el("tr", { dataset: { phase: name } }, el("td", {}, name), el("td", { class: "num completed" }, fmt(p.completed)),
        el("td", { class: "num" }, fmt(expected)), el("td", { class: "num" }, fmt(p.errors)),
        el("td", { class: "num" }, fmt(p.elapsed_s)), el("td", {}, progressBar(p.completed, expected))));
    }
    const w = snapshot.workers;
    if (w) document.getElementById("workers").textContent = `${fmt(w.ready)} ready of ${fmt(w.total)}`;
    // Problems: one line each (operator mode), or the local run's failure events.
    const problems = (snapshot.failures || []).map((f) => (typeof f === "string" ? f : f.reason || f.message || JSON.stringify(f)));
    document.getElementById("problems-row").hidden = problems.length === 0;
    document.getElementById("problems").textContent = problems.join("; ");
    // A live run's server may stop right after its last snapshot: keep what is shown then.
    if (TERMINAL.has(phase) && snapshot.progress) loadRuns().catch(() => setLive("off", "finished; server gone"));
  }

  let pollTimer = null;
  async function poll() {
    try {
      render(await getJson(fill(CFG.statusUrl, { ns, name })));
      setLive("polling", "polling");
    } catch (err) {
      if (err.status === 404) { setLive("off", "job deleted"); return; }  // nothing left to follow
      setLive("lost", "connection lost");
    }
    if (!TERMINAL.has(phase)) pollTimer = setTimeout(poll, CFG.pollIntervalS * 1000);
  }

  function connect() {
    const socket = new WebSocket(wsUrl(fill(CFG.progressWsUrl, { ns, name })));
    socket.onopen = () => setLive("websocket", "live");
    socket.onmessage = (event) => render(JSON.parse(event.data));
    socket.onclose = () => {
      if (TERMINAL.has(phase)) { setLive("off", "finished"); return; }
      if (CFG.statusUrl) { setLive("polling", "polling"); clearTimeout(pollTimer); poll(); }
      else setLive("lost", "connection lost");
    };
  }

  async function loadRuns() {
    const runs = await runsOf(ns, name);
    document.getElementById("run-count").textContent = String(runs.length);
    const body = document.querySelector("#runs tbody");
    const checked = new Set([...body.querySelectorAll("input:checked")].map((c) => c.value));
    body.replaceChildren();
    for (const run of runs) {
      const box = el("input", { type: "checkbox", value: String(run.epoch) });
      box.checked = checked.has(String(run.epoch));
      box.addEventListener("change", updateCompare);
      const files = (run.files || []).map((f) => f.name).join(", ");
      const phase = el("td", { class: "phase" });
      phaseCell(phase, run.phase);
      body.append(el("tr", { dataset: { epoch: String(run.epoch) } }, el("td", {}, box),
        el("td", {}, el("a", { href: runHref(ns, name, run.epoch) }, String(run.epoch))), phase,
        el("td", {}, fmt(run.completedAt)), el("td", {}, files || "\u2013")));
    }
    updateCompare();
  }

  function updateCompare() {
    const picked = [...document.querySelectorAll("#runs input:checked")].map((c) => c.value);
    const button = document.getElementById("compare");
    button.disabled = picked.length < 2;
    button.onclick = () => {
      location.href = `${CFG.base}/compare?ns=${encodeURIComponent(ns)}&name=${encodeURIComponent(name)}&epochs=${picked.map(encodeURIComponent).join(",")}`;
    };
  }

  const jobs = (await getJson(CFG.jobsUrl)).jobs || [];
  const job = jobs.find((j) => j.namespace === ns && j.name === name);
  if (!job) throw new Error(`no job ${ns}/${name}`);
  render({ phase: job.phase, progress: null });
  await loadRuns();
  if (CFG.progressWsUrl && !TERMINAL.has(phase)) connect();
  else if (CFG.statusUrl && !TERMINAL.has(phase)) poll();
}

function metricRows(summary) {
  return Object.entries(summary || {}).filter(([, v]) => v && typeof v === "object" && "unit" in v && "avg" in v);
}

async function runPage() {
  const { ns, name, epoch } = params();
  document.getElementById("run-title").textContent = `${ns}/${name} run ${epoch}`;
  crumbs([`${ns}/${name}`, jobHref(ns, name)], [String(epoch)]);
  const run = (await runsOf(ns, name)).find((r) => String(r.epoch) === String(epoch));
  if (!run) throw new Error(`no run ${epoch} of ${ns}/${name}`);
  const data = await loadRun(ns, name, run.epoch, run.files);
  const body = document.querySelector("#metrics tbody");
  for (const [tag, m] of metricRows(data.summary)) {
    body.append(el("tr", { dataset: { metric: tag } }, el("td", {}, tag), el("td", {}, m.unit),
      ...["avg", "min", "p50", "p90", "p95", "p99", "max"].map((k) => el("td", { class: "num" }, fmt(m[k])))));
  }
  for (const [id, tag, label] of DIST) cdfChart(document.getElementById(`chart-${id}`), [data], tag, label);
  const pct = DIST.filter(([, tag]) => data.summary && data.summary[tag]);
  const pctData = [PERCENTILES.map((_, i) => i), ...pct.map(([, tag]) => PERCENTILES.map((p) => data.summary[tag][p] ?? null))];
  chart(document.getElementById("chart-percentiles"), {
    data: pctData, labels: pct.map(([, , label]) => label), xLabel: "percentile", yLabel: "ms",
    points: pct.length * PERCENTILES.length, xValues: PERCENTILES,
  });
  throughputChart(document.getElementById("chart-throughput"), [data]);
  const serverBody = document.querySelector("#server tbody");
  for (const [k, v] of serverRows(data.summary)) serverBody.append(el("tr", {}, el("th", {}, k), el("td", {}, fmt(v))));
  if (!serverBody.children.length) serverBody.append(el("tr", {}, el("td", { colspan: "2" }, "the server did not say")));
  const metricsBody = document.querySelector("#server-metrics tbody");
  for (const [name, type, labels, ...stats] of serverMetricRows(data.serverMetrics)) {
    metricsBody.append(el("tr", { dataset: { metric: name } }, el("td", {}, name), el("td", {}, type), el("td", {}, labels),
      ...stats.map((v) => el("td", { class: "num" }, fmt(v)))));
  }
  if (!metricsBody.children.length) metricsBody.append(el("tr", {}, el("td", { colspan: "8" }, "no server metrics in this run")));
  const errors = errorsByType(data.records);
  const errBody = document.querySelector("#errors tbody");
  for (const [type, count] of errors) errBody.append(el("tr", {}, el("td", {}, type), el("td", { class: "num" }, count)));
  if (!errors.length) errBody.append(el("tr", {}, el("td", { colspan: "2" }, "no errors")));
  chart(document.getElementById("chart-errors"), {
    data: [errors.map((_, i) => i), errors.map(([, c]) => c)], labels: ["errors"], xLabel: "error type",
    yLabel: "requests", points: errors.length, bars: true, xValues: errors.map(([t]) => t),
  });
}

/** What the server said it is (aiperf_extensions.server of the summary), as table rows. */
function serverRows(summary) {
  const server = summary && summary.aiperf_extensions && summary.aiperf_extensions.server;
  if (!server) return [];
  const rows = [["Server", server.server], ["Version", server.version],
    ["Models", (server.models || []).join(", ")]];
  for (const [k, v] of Object.entries(server.llamacpp || {})) rows.push([`llama.cpp ${k}`, typeof v === "object" ? JSON.stringify(v) : v]);
  return rows.filter(([, v]) => v !== null && v !== undefined && v !== "");
}

/** One row per series of server_metrics_export.json: counters by total and rate, gauges by
 * avg and percentiles, histograms by their bucket-derived percentile estimates. */
function serverMetricRows(doc) {
  const rows = [];
  for (const [name, metric] of Object.entries((doc && doc.metrics) || {})) {
    for (const s of metric.series || []) {
      const st = s.stats || {};
      const labels = Object.entries(s.labels || {}).map(([k, v]) => `${k}=${v}`).join(" ");
      rows.push([name, metric.type, labels, st.total, st.rate, st.avg, st.p50 ?? st.p50_estimate, st.p99 ?? st.p99_estimate]);
    }
  }
  return rows;
}

const COMPARED = [
  ["request_throughput", "avg"], ["output_token_throughput", "avg"], ["request_latency", "avg"],
  ["request_latency", "p99"], ["time_to_first_token", "avg"], ["time_to_first_token", "p99"],
  ["inter_token_latency", "avg"], ["inter_token_latency", "p99"], ["request_count", "avg"],
  ["error_request_count", "avg"],
];

async function comparePage() {
  const { ns, name, epochs } = params();
  const wanted = (epochs || "").split(",").filter(Boolean);
  document.getElementById("compare-title").textContent = `${ns}/${name}: ${wanted.length} runs`;
  crumbs([`${ns}/${name}`, jobHref(ns, name)], ["compare"]);
  if (wanted.length < 2) throw new Error("pick two or more runs to compare");
  const all = await runsOf(ns, name);
  const runs = await Promise.all(wanted.map((e) => {
    const run = all.find((r) => String(r.epoch) === e);
    if (!run) throw new Error(`no run ${e} of ${ns}/${name}`);
    return loadRun(ns, name, run.epoch, run.files);
  }));
  const head = document.querySelector("#comparison thead tr");
  for (const r of runs) head.append(el("th", {}, el("a", { href: runHref(ns, name, r.epoch) }, String(r.epoch))));
  const body = document.querySelector("#comparison tbody");
  for (const [tag, stat] of COMPARED) {
    const cells = runs.map((r) => r.summary && r.summary[tag] ? r.summary[tag][stat] : null);
    if (cells.every((c) => c === null || c === undefined)) continue;
    const unit = runs.map((r) => r.summary && r.summary[tag] && r.summary[tag].unit).find(Boolean) || "";
    body.append(el("tr", { dataset: { metric: `${tag}.${stat}` } }, el("td", {}, `${tag} ${stat} (${unit})`),
      ...cells.map((c) => el("td", { class: "num" }, fmt(c)))));
  }
  for (const [id, tag, label] of DIST) cdfChart(document.getElementById(`cmp-${id}`), runs, tag, label);
  throughputChart(document.getElementById("cmp-throughput"), runs);
}

const PAGES = { index: indexPage, job: jobPage, run: runPage, compare: comparePage, sweep: sweepPage };

document.addEventListener("DOMContentLoaded", () => {
  const page = document.body.dataset.page;
  PAGES[page]().then(() => { document.body.dataset.ready = "1"; }, (err) => {
    showError(err);
    document.body.dataset.ready = "error";
  });
});
