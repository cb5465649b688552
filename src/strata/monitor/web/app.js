// The live monitor page: polls /api/v1/monitor once a second and draws two gauges and their
// history. No dependencies; everything is served by the strata process itself.
'use strict';

const $ = (id) => document.getElementById(id);

function fmt(v, digits) {
  if (typeof v !== 'number' || !isFinite(v)) return '–';
  if (Math.abs(v) >= 100) return Math.round(v).toLocaleString('en-US');
  return v.toFixed(digits === undefined ? 1 : digits);
}

function setGauge(id, valueId, pct) {
  const clamped = Math.max(0, Math.min(100, pct));
  const fill = document.querySelector('#' + id + ' .fill');
  fill.setAttribute('stroke-dasharray', clamped.toFixed(1) + ' 100');
  fill.style.visibility = clamped >= 0.5 ? 'visible' : 'hidden';  // a round cap would draw a dot at 0
  $(valueId).textContent = Math.round(pct) + '%';
}

function drawChart(canvas, points, key, color) {
  const ctx = canvas.getContext('2d');
  const w = canvas.width, h = canvas.height, left = 34, bottom = 20, top = 8, right = 8;
  ctx.clearRect(0, 0, w, h);
  ctx.font = '11px system-ui, sans-serif';
  ctx.fillStyle = '#6b7385';
  ctx.strokeStyle = '#e3e6ee';
  ctx.lineWidth = 1;
  for (const p of [0, 25, 50, 75, 100]) {
    const y = top + (h - top - bottom) * (1 - p / 100);
    ctx.beginPath(); ctx.moveTo(left, y); ctx.lineTo(w - right, y); ctx.stroke();
    ctx.fillText(String(p), 4, y + 4);
  }
  if (points.length === 0) return;
  const t0 = points[0].start_seconds, t1 = Math.max(points[points.length - 1].start_seconds, t0 + 1e-9);
  const x = (t) => left + (w - left - right) * (points.length === 1 ? 1 : (t - t0) / (t1 - t0));
  const y = (v) => top + (h - top - bottom) * (1 - Math.max(0, Math.min(100, v)) / 100);
  ctx.strokeStyle = color;
  ctx.lineWidth = 2;
  ctx.beginPath();
  points.forEach((p, i) => { const px = x(p.start_seconds), py = y(p[key]); if (i) ctx.lineTo(px, py); else ctx.moveTo(px, py); });
  ctx.stroke();
  ctx.fillStyle = color;
  for (const p of points.slice(-1)) { ctx.beginPath(); ctx.arc(x(p.start_seconds), y(p[key]), 3, 0, 7); ctx.fill(); }
  ctx.fillStyle = '#6b7385';
  ctx.fillText(fmt(t0, 0) + ' s', left, h - 5);
  const last = fmt(t1, 0) + ' s';
  ctx.fillText(last, w - right - ctx.measureText(last).width, h - 5);
}

function fillTable(tbody, rows) {
  tbody.replaceChildren(...rows.map((cells) => {
    const tr = document.createElement('tr');
    for (const c of cells) { const td = document.createElement('td'); td.textContent = c; tr.appendChild(td); }
    return tr;
  }));
}

function render(api) {
  const status = $('status');
  const run = api.run;
  if (!api.started) { status.textContent = 'waiting for the computation to start'; status.className = 'status'; }
  else if (api.running) { status.textContent = 'running · ' + run.replicas + ' replica(s) · ' + run.dtype + ' · peak ' + fmt(run.peak_gflops_per_core) + ' GFLOP/s per core · window ' + run.interval_seconds + ' s'; status.className = 'status running'; }
  else { status.textContent = 'finished'; status.className = 'status'; }
  const w = api.latest;
  if (w) {
    setGauge('gauge-matrix', 'matrix-value', w.utilization_pct);
    setGauge('gauge-idle', 'idle-value', w.idle_pct);
    const unit = run ? run.example_unit : 'examples';
    $('console-line').textContent = 'matrix ' + Math.round(w.utilization_pct) + '% · idle ' + Math.round(w.idle_pct) + '% · ' + fmt(w.examples_per_s) + ' ' + unit + '/s · step ' + Math.round(w.step_ms) + ' ms · window ' + w.index + ' · step ' + w.step;
    document.body.dataset.window = String(w.index);
    fillTable($('replicas').tBodies[0], w.replicas.map((r, i) => [i, fmt(r.utilization_pct), fmt(r.idle_pct), r.steps, fmt(r.step_ms), fmt(r.examples_per_s)]));
    fillTable($('stages').tBodies[0], w.stages.map((s) => [s.path, s.name, fmt(s.elements_per_s), fmt(s.mb_per_s, 2), fmt(s.busy_pct), fmt(s.blocked_upstream_pct), fmt(s.blocked_downstream_pct), s.buffer_fill + '/' + s.buffer_capacity, s.parallelism]));
  }
  drawChart($('chart-matrix'), api.history, 'utilization_pct', '#2f6fdf');
  drawChart($('chart-idle'), api.history, 'idle_pct', '#e0762f');
  if (api.report) {
    $('report-section').hidden = false;
    $('report-verdict').textContent = 'Idle ' + fmt(api.report.idle_pct) + '% of step time: ' + api.report.verdict + (api.report.slowest_stage ? ' · slowest stage: ' + api.report.slowest_stage : '');
    $('report-suggestion').textContent = api.report.suggestion;
  }
  document.body.dataset.updates = String(Number(document.body.dataset.updates) + 1);
}

async function poll() {
  try {
    const res = await fetch('/api/v1/monitor', { cache: 'no-store' });
    if (!res.ok) throw new Error('HTTP ' + res.status);
    render(await res.json());
  } catch (e) {
    $('status').textContent = 'disconnected (' + e.message + ')';
    $('status').className = 'status';
  }
  setTimeout(poll, 1000);
}

poll();
