// The dashboard page MetricsServer serves at `/`: one HTML document with its CSS, JS and SVG
// inline, so it works offline and needs no build step. It polls /api/status and
// /api/spectrum twice a second; rates are differences of the counters over the server's own
// clock (time_ns), so a throttled or virtual-time browser still shows true rates.
#include "pipeline/http_server.hpp"

namespace sluice {

std::string_view dashboard_page() {
  static constexpr std::string_view kPage = R"HTML(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Sluice dashboard</title>
<style>
  :root { --bg:#0f1419; --panel:#171e26; --edge:#263240; --text:#d8e0e8; --dim:#8093a7; --accent:#38bdf8;
          --good:#34d399; --warn:#fbbf24; --bad:#f87171; }
  * { box-sizing: border-box; }
  body { margin:0; background:var(--bg); color:var(--text); font:14px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; }
  header { display:flex; align-items:baseline; gap:16px; padding:14px 24px; border-bottom:1px solid var(--edge); }
  header h1 { margin:0; font-size:20px; font-weight:600; letter-spacing:.02em; }
  header .pipeline { color:var(--accent); }
  #state { margin-left:auto; font-size:13px; color:var(--dim); }
  #state::before { content:""; display:inline-block; width:9px; height:9px; border-radius:50%; margin-right:6px; background:var(--dim); }
  #state.live::before { background:var(--good); box-shadow:0 0 6px var(--good); }
  #state.down::before { background:var(--bad); }
  main { padding:18px 24px; display:grid; gap:18px; }
  h2 { margin:0 0 10px; font-size:13px; font-weight:600; text-transform:uppercase; letter-spacing:.08em; color:var(--dim); }
  .panel { background:var(--panel); border:1px solid var(--edge); border-radius:10px; padding:14px 16px; }
  #lanes { display:flex; flex-wrap:wrap; gap:18px; }
  .lane { background:var(--panel); border:1px solid var(--edge); border-radius:10px; padding:12px 16px 14px; width:300px; }
  .lane .name { font-weight:600; font-size:15px; }
  .lane svg { display:block; margin:4px auto 0; }
  .gauge-track { fill:none; stroke:#25303c; stroke-width:16; stroke-linecap:round; }
  .gauge-fill { fill:none; stroke:var(--accent); stroke-width:16; stroke-linecap:round; transition:stroke-dashoffset .4s; }
  .gauge-value { fill:var(--text); font-size:26px; font-weight:600; text-anchor:middle; }
  .gauge-unit { fill:var(--dim); font-size:12px; text-anchor:middle; }
  .gauge-scale { fill:var(--dim); font-size:10px; }
  .facts { display:grid; grid-template-columns:1fr 1fr; gap:2px 12px; font-size:12.5px; color:var(--dim); }
  .facts b { color:var(--text); font-weight:500; font-variant-numeric:tabular-nums; }
  table { width:100%; border-collapse:collapse; font-variant-numeric:tabular-nums; }
  th { text-align:left; font-weight:500; color:var(--dim); font-size:12px; padding:4px 8px; border-bottom:1px solid var(--edge); }
  td { padding:5px 8px; border-bottom:1px solid #1d2631; white-space:nowrap; }
  td.num, th.num { text-align:right; }
  .bar { display:inline-block; width:80px; height:8px; background:#25303c; border-radius:4px; vertical-align:middle; margin-right:6px; overflow:hidden; }
  .bar > i { display:block; height:100%; background:var(--accent); }
  .bar.queue > i { background:var(--good); }
  .bar.queue.high > i { background:var(--warn); }
  .drops { color:var(--bad); }
  .zero { color:var(--dim); }
  .spectrum-box { margin-top:6px; }
  .spectrum-box .title { font-size:13px; color:var(--dim); margin-bottom:4px; }
  .spectrum-box .title b { color:var(--text); font-weight:500; }
  svg.spectrum { width:100%; height:auto; display:block; }
  svg.spectrum .grid { stroke:#223040; stroke-width:1; }
  svg.spectrum .axis { fill:var(--dim); font-size:11px; }
  svg.spectrum .trace { fill:none; stroke:var(--accent); stroke-width:1.4; stroke-linejoin:round; }
  svg.spectrum .area { fill:rgba(56,189,248,.12); stroke:none; }
  svg.spectrum .peak { fill:var(--warn); }
  svg.spectrum .peak-label { fill:var(--warn); font-size:12px; }
  .empty { color:var(--dim); font-style:italic; }
</style>
</head>
<body data-updates="0">
<header>
  <h1>Sluice <span class="pipeline" id="pipeline"></span></h1>
  <span id="state">connecting…</span>
</header>
<main>
  <section><h2>Lanes</h2><div id="lanes"></div></section>
  <section class="panel"><h2>Stages</h2>
    <table><thead><tr><th>lane</th><th>stage</th><th>type</th><th class="num">rate</th><th class="num">Msamples/s</th>
      <th class="num">total</th><th>busy</th><th>input queue</th><th class="num">drops</th><th class="num">latency p50 / p99</th></tr></thead>
      <tbody id="stages"></tbody></table>
  </section>
  <section class="panel"><h2>Spectrum (latest FFT row)</h2><div id="spectra"><div class="empty">no fft stage has produced a row yet</div></div></section>
</main>
<script>
"use strict";
const SVG = "http://www.w3.org/2000/svg";
const history = new Map();   // "lane/stage" -> [{t, bytes, samples}] (server clock)
const scales = new Map();    // lane -> gauge full scale in bytes/s
let updates = 0;

function el(tag, attrs, text) {
  const node = tag.startsWith("svg:") ? document.createElementNS(SVG, tag.slice(4)) : document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, value);
  if (text !== undefined) node.textContent = text;
  return node;
}
function formatRate(bytes) {
  const units = [["TB/s", 1e12], ["GB/s", 1e9], ["MB/s", 1e6], ["kB/s", 1e3]];
  for (const [unit, size] of units) if (bytes >= size) return [(bytes / size).toFixed(bytes / size >= 100 ? 0 : 2), unit];
  return [bytes.toFixed(0), "B/s"];
}
function formatCount(value) {
  const units = [["T", 1e12], ["G", 1e9], ["M", 1e6], ["k", 1e3]];
  for (const [unit, size] of units) if (value >= size) return (value / size).toFixed(2) + unit;
  return String(value);
}
function formatLatency(ns) {
  if (!ns) return "–";
  if (ns >= 1e9) return (ns / 1e9).toFixed(2) + " s";
  if (ns >= 1e6) return (ns / 1e6).toFixed(1) + " ms";
  if (ns >= 1e3) return (ns / 1e3).toFixed(0) + " µs";
  return ns + " ns";
}
function niceCeiling(value) {
  if (value <= 0) return 1e6;
  const power = Math.pow(10, Math.floor(Math.log10(value)));
  for (const step of [1, 2, 2.5, 5, 10]) if (step * power >= value) return step * power;
  return 10 * power;
}
// Rate over at least half a second of the server's clock; before that, the stage's average.
function rateOf(key, now, stage) {
  let points = history.get(key);
  if (!points) { points = []; history.set(key, points); }
  points.push({t: now, bytes: stage.bytes, samples: stage.samples});
  while (points.length > 2 && now - points[1].t >= 5e8) points.shift();
  const base = points[0];
  const span = (now - base.t) / 1e9;
  if (span >= 0.05 && stage.running) {
    return {bytes: (stage.bytes - base.bytes) / span, samples: (stage.samples - base.samples) / span};
  }
  return {bytes: stage.bytes_per_second, samples: stage.samples_per_second};
}

function gauge(lane, rate, samplesRate) {
  const full = Math.max(scales.get(lane) || 0, niceCeiling(rate * 1.15));
  scales.set(lane, full);
  const fraction = Math.min(rate / full, 1);
  const radius = 100, length = Math.PI * radius;
  const svg = el("svg:svg", {width: 260, height: 150, viewBox: "0 0 260 150"});
  const arc = `M 30 130 A ${radius} ${radius} 0 0 1 230 130`;
  svg.append(el("svg:path", {d: arc, class: "gauge-track"}));
  svg.append(el("svg:path", {d: arc, class: "gauge-fill", "stroke-dasharray": length,
                             "stroke-dashoffset": length * (1 - fraction)}));
  const [value, unit] = formatRate(rate);
  svg.append(el("svg:text", {x: 130, y: 112, class: "gauge-value", id: "gauge-" + lane,
                             "data-bytes-per-second": rate.toFixed(0)}, value));
  svg.append(el("svg:text", {x: 130, y: 132, class: "gauge-unit"}, unit + " · " + (samplesRate / 1e6).toFixed(1) + " Msps"));
  svg.append(el("svg:text", {x: 22, y: 146, class: "gauge-scale"}, "0"));
  svg.append(el("svg:text", {x: 238, y: 146, class: "gauge-scale", "text-anchor": "end"}, formatRate(full).join(" ")));
  return svg;
}

function renderStatus(status) {
  document.getElementById("pipeline").textContent = status.pipeline;
  const now = status.time_ns;
  const lanes = document.getElementById("lanes");
  const rows = document.getElementById("stages");
  lanes.replaceChildren();
  rows.replaceChildren();
  for (const lane of status.lanes) {
    let drops = 0, lost = 0;
    const rates = lane.stages.map(stage => {
      drops += stage.drops_total; lost += stage.lost_samples;
      return rateOf(lane.name + "/" + stage.name, now, stage);
    });
    const source = lane.stages[0], sink = lane.stages[lane.stages.length - 1];
    const card = el("div", {class: "lane", "data-lane": lane.name});
    card.append(el("div", {class: "name"}, lane.name));
    card.append(gauge(lane.name, rates[0].bytes, rates[0].samples));
    const facts = el("div", {class: "facts"});
    const fact = (label, value, cls) => { const d = el("div", {}, label + " "); d.append(el("b", {class: cls || ""}, value)); facts.append(d); };
    fact("samples", formatCount(source.samples));
    fact("out", formatCount(sink.bytes) + "B");
    fact("drops", formatCount(drops), drops ? "drops" : "");
    fact("lost samples", formatCount(lost), lost ? "drops" : "");
    card.append(facts);
    lanes.append(card);
    lane.stages.forEach((stage, index) => {
      const row = el("tr", {"data-stage": lane.name + "/" + stage.name});
      const [value, unit] = formatRate(rates[index].bytes);
      row.append(el("td", {}, lane.name), el("td", {}, stage.name), el("td", {class: "zero"}, stage.type),
                 el("td", {class: "num rate", "data-bytes-per-second": rates[index].bytes.toFixed(0)}, value + " " + unit),
                 el("td", {class: "num"}, (rates[index].samples / 1e6).toFixed(2)),
                 el("td", {class: "num", "data-samples": stage.samples}, formatCount(stage.samples)));
      const busy = el("td");
      const busyShare = stage.busy_fraction_flowing ?? stage.busy_fraction;  // over the time data flowed
      const busyBar = el("span", {class: "bar"}); busyBar.append(el("i", {style: `width:${Math.min(busyShare, 1) * 100}%`}));
      busy.append(busyBar, document.createTextNode((busyShare * 100).toFixed(0) + "%"));
      const queue = el("td");
      if (stage.queue_capacity > 0) {
        const fill = stage.queue_depth / stage.queue_capacity;
        const queueBar = el("span", {class: "bar queue" + (fill > 0.75 ? " high" : "")});
        queueBar.append(el("i", {style: `width:${fill * 100}%`}));
        queue.append(queueBar, document.createTextNode(stage.queue_depth + "/" + stage.queue_capacity));
      } else {
        queue.append(el("span", {class: "zero"}, "source"));
      }
      const dropText = Object.entries(stage.drops).filter(([, n]) => n > 0).map(([reason, n]) => reason + " " + formatCount(n)).join(", ");
      row.append(busy, queue,
                 el("td", {class: "num " + (stage.drops_total ? "drops" : "zero"), title: dropText}, formatCount(stage.drops_total)),
                 el("td", {class: "num"}, formatLatency(stage.latency_p50_ns) + " / " + formatLatency(stage.latency_p99_ns)));
      rows.append(row);
    });
  }
}

function formatHz(hz, digits) {
  const size = Math.abs(hz);
  if (size >= 1e9) return (hz / 1e9).toFixed(digits) + " GHz";
  if (size >= 1e6) return (hz / 1e6).toFixed(digits) + " MHz";
  if (size >= 1e3) return (hz / 1e3).toFixed(digits) + " kHz";
  return hz.toFixed(0) + " Hz";
}

function renderSpectra(spectra) {
  const box = document.getElementById("spectra");
  if (!spectra.length) return;
  box.replaceChildren();
  const width = 960, height = 300, left = 52, right = 16, top = 14, bottom = 30;
  for (const spectrum of spectra) {
    const values = spectrum.decibels;
    let peak = 0;
    values.forEach((value, index) => { if (value > values[peak]) peak = index; });
    const ceiling = Math.ceil((values[peak] + 5) / 10) * 10;
    const floor = Math.max(Math.floor(Math.min(...values) / 10) * 10, ceiling - 140);
    const x = index => left + (width - left - right) * index / Math.max(values.length - 1, 1);
    const y = value => top + (height - top - bottom) * (ceiling - Math.max(value, floor)) / (ceiling - floor);
    const peakHz = spectrum.first_hz + spectrum.step_hz * peak;
    const wrap = el("div", {class: "spectrum-box"});
    const title = el("div", {class: "title"});
    title.append(el("b", {}, spectrum.lane + " / " + spectrum.stage),
                 document.createTextNode(` · ${spectrum.bins}-point · row ${spectrum.row} · ${formatHz(spectrum.bin_hz, 2)} per bin`));
    wrap.append(title);
    const svg = el("svg:svg", {class: "spectrum", viewBox: `0 0 ${width} ${height}`, "data-lane": spectrum.lane,
                               "data-stage": spectrum.stage, "data-sequence": spectrum.sequence,
                               "data-peak-hz": peakHz.toFixed(1), "data-peak-db": values[peak].toFixed(2)});
    for (let level = floor; level <= ceiling; level += (ceiling - floor) > 80 ? 20 : 10) {
      svg.append(el("svg:line", {x1: left, x2: width - right, y1: y(level), y2: y(level), class: "grid"}));
      svg.append(el("svg:text", {x: left - 6, y: y(level) + 4, class: "axis", "text-anchor": "end"}, level + " dB"));
    }
    // Frequency ticks at round values (1-2-5 steps), about ten across.
    const span = spectrum.step_hz * (values.length - 1);
    if (span > 0) {
      const tickHz = niceCeiling(span / 10);
      for (let hz = Math.ceil(spectrum.first_hz / tickHz) * tickHz; hz <= spectrum.first_hz + span + 1e-6; hz += tickHz) {
        const index = (hz - spectrum.first_hz) / spectrum.step_hz;
        svg.append(el("svg:line", {x1: x(index), x2: x(index), y1: top, y2: height - bottom, class: "grid"}));
        svg.append(el("svg:text", {x: x(index), y: height - bottom + 16, class: "axis", "text-anchor": "middle"},
                      Math.abs(hz) < tickHz / 2 ? "0" : formatHz(hz, tickHz >= 1e6 && tickHz % 1e6 === 0 ? 0 : 1)));
      }
    }
    const points = values.map((value, index) => x(index).toFixed(1) + "," + y(value).toFixed(1)).join(" ");
    svg.append(el("svg:polygon", {class: "area", points: `${left},${height - bottom} ${points} ${width - right},${height - bottom}`}));
    svg.append(el("svg:polyline", {class: "trace", points}));
    svg.append(el("svg:circle", {cx: x(peak), cy: y(values[peak]), r: 4, class: "peak"}));
    const anchor = x(peak) > width * 0.7 ? "end" : "start";
    svg.append(el("svg:text", {x: x(peak) + (anchor === "end" ? -8 : 8), y: y(values[peak]) + 4, class: "peak-label",
                               "text-anchor": anchor}, `peak ${formatHz(peakHz, 3)} · ${values[peak].toFixed(1)} dB`));
    wrap.append(svg);
    box.append(wrap);
  }
}

async function poll() {
  const state = document.getElementById("state");
  try {
    const [status, spectra] = await Promise.all([fetch("/api/status").then(r => r.json()),
                                                 fetch("/api/spectrum").then(r => r.json())]);
    renderStatus(status);
    renderSpectra(spectra);
    document.body.dataset.updates = String(++updates);
    state.className = "live";
    state.textContent = "live · " + new Date().toLocaleTimeString();
  } catch (error) {
    state.className = "down";
    state.textContent = "disconnected (the run has ended?)";
  }
  setTimeout(poll, 500);
}
poll();
</script>
</body>
</html>
)HTML";
  return kPage;
}

}  // namespace sluice
