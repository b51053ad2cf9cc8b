// The Tide status page: polls /api/status every second and plots each
// pipeline's throughput and lag over the last 15 minutes with uPlot.
"use strict";
(function () {
  const HISTORY = 900; // points per series, as the server keeps
  const root = document.getElementById("pipelines");
  const views = new Map(); // pipeline name -> view
  window.tideCharts = {}; // name -> {throughput, lag}: read by the browser test
  let since = 0; // the newest sample received; 0 asks for the whole history

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function fmtNum(x, digits) {
    if (x === null || x === undefined) return "—";
    return Number(x).toLocaleString(undefined, { maximumFractionDigits: digits === undefined ? 1 : digits });
  }

  function fmtBytes(x) {
    if (x === null || x === undefined) return "—";
    const u = ["B", "KiB", "MiB", "GiB"];
    let i = 0;
    while (x >= 1024 && i < u.length - 1) { x /= 1024; i++; }
    return x.toFixed(i ? 1 : 0) + " " + u[i];
  }

  function fmtAge(s) {
    if (s < 1) return s.toFixed(1) + " s";
    if (s < 120) return Math.round(s) + " s";
    if (s < 7200) return Math.round(s / 60) + " min";
    return (s / 3600).toFixed(1) + " h";
  }

  function chart(parent, label, color, width) {
    const opts = {
      width: width, height: 180,
      scales: { x: { time: true }, y: { range: (u, min, max) => [0, Math.max(1, max * 1.1)] } },
      axes: [{}, { size: 60 }],
      legend: { show: true },
      series: [{}, { label: label, stroke: color, width: 2, fill: color + "22", spanGaps: false }],
    };
    return new uPlot(opts, [[], []], parent);
  }

  function plotWidth() {
    return Math.max(300, Math.floor((root.clientWidth - 80) / (root.clientWidth > 940 ? 2 : 1)));
  }

  window.addEventListener("resize", () => {
    const w = plotWidth();
    for (const v of views.values()) {
      v.throughput.setSize({ width: w, height: 180 });
      v.lag.setSize({ width: w, height: 180 });
    }
  });

  function makeView(name) {
    const card = el("section", "pipeline");
    card.dataset.pipeline = name;
    const h = el("h2");
    const title = el("span", "name", name);
    const state = el("span", "state", "");
    h.append(title, state);
    const error = el("div", "error"); error.hidden = true;
    const degraded = el("div", "degraded"); degraded.hidden = true;
    const warning = el("div", "warning"); warning.hidden = true;
    const numbers = el("div", "numbers");
    const cp = el("div", "checkpoint");
    const plots = el("div", "plots");
    const p1 = el("div", "plot"); p1.append(el("h3", "", "Throughput (events/s)"));
    const p2 = el("div", "plot"); p2.append(el("h3", "", "Lag (seconds)"));
    const lagNote = el("div", "note", "This source does not report a lag in seconds."); lagNote.hidden = true;
    p2.append(lagNote);
    plots.append(p1, p2);
    const source = el("dl", "source"); source.hidden = true;
    const errors = el("table", "errors"); errors.hidden = true;
    const namespaces = el("table", "namespaces"); namespaces.hidden = true;
    card.append(h, error, degraded, warning, numbers, cp, plots, namespaces, source, errors);
    document.getElementById("none")?.remove();
    root.append(card);
    const w = plotWidth();
    const v = {
      card, state, error, degraded, warning, numbers, namespaces, cp, source, errors, lagNote,
      data: { t: [], eps: [], lag: [] },
      throughput: chart(p1, "events/s", "#0969da", w),
      lag: chart(p2, "lag s", "#bf3989", w),
    };
    window.tideCharts[name] = { throughput: v.throughput, lag: v.lag };
    views.set(name, v);
    return v;
  }

  function setNumbers(v, p) {
    const rows = [
      ["events in", fmtNum(p.events_in, 0)],
      ["events out", fmtNum(p.events_out, 0)],
      ["events/s", fmtNum(p.events_per_second)],
      ["bytes/s", fmtBytes(p.bytes_per_second) + "/s"],
      ["bytes out", fmtBytes(p.bytes_out)],
      ["lag", p.lag_seconds === null ? "—" : fmtNum(p.lag_seconds, 3) + " s"],
      ["lag (events)", p.lag_events === null ? "—" : fmtNum(p.lag_events, 0)],
      ["batches", fmtNum(p.batches, 0)],
    ];
    if (p.dead_letters || p.skipped) {
      rows.push(["dead letters", fmtNum(p.dead_letters, 0)], ["skipped", fmtNum(p.skipped, 0)]);
    }
    v.numbers.replaceChildren(...rows.map(([k, val]) => {
      const d = el("div");
      d.append(el("span", "k", k), el("span", "v", val));
      return d;
    }));
    if (p.dead_letter_error) {
      const d = el("div");
      d.append(el("span", "k", "last set aside"), el("span", "v", p.dead_letter_error));
      v.numbers.append(d);
    }
  }

  function describeCheckpoint(c) {
    if (!c) return "checkpoint: none yet";
    let at;
    if (c.cluster_time) at = "cluster time " + c.cluster_time.time + " (" + c.cluster_time.t + ", " + c.cluster_time.i + ")";
    else if (c.stream_sequence !== undefined && c.stream_sequence !== null) at = "stream sequence " + c.stream_sequence;
    else at = "position " + JSON.stringify(c.position);
    return "checkpoint: " + at + ", saved " + fmtAge(c.age_seconds) + " ago";
  }

  function setSource(v, src) {
    if (!src || Object.keys(src).length === 0) { v.source.hidden = true; v.warning.hidden = true; return; }
    v.source.hidden = false;
    v.source.replaceChildren(...Object.keys(src).sort().flatMap(k => [el("dt", "", k), el("dd", "", JSON.stringify(src[k]))]));
    if (src.headroom_warning) {
      v.warning.hidden = false;
      v.warning.textContent = "Oplog headroom low: the checkpoint falls out of the oplog window in about " +
        fmtAge(src.checkpoint_headroom_seconds || 0) + " (warning below " + fmtAge(src.headroom_warn_seconds || 0) +
        "). Resume soon, or plan a re-snapshot (tide snapshot).";
    } else {
      v.warning.hidden = true;
    }
  }

  function setErrors(v, errs) {
    const stages = Object.keys(errs || {}).sort();
    if (stages.length === 0) { v.errors.hidden = true; return; }
    v.errors.hidden = false;
    const head = el("tr");
    head.append(el("th", "", "stage"), el("th", "", "count"), el("th", "", "last error"));
    const rows = [head];
    for (const s of stages) {
      const e = errs[s];
      const last = e.last.length ? e.last[e.last.length - 1] : null;
      const tr = el("tr");
      tr.append(el("td", "", s), el("td", "", String(e.count)),
        el("td", "msg", last ? last.time + "  " + last.message : ""));
      rows.push(tr);
    }
    v.errors.replaceChildren(...rows);
  }

  // setDegraded shows which end is retrying, and since when it has not
  // succeeded, while the pipeline is degraded.
  function setDegraded(v, d) {
    v.degraded.hidden = !d;
    if (!d) { v.degraded.replaceChildren(); return; }
    v.degraded.replaceChildren(
      el("strong", "", "DEGRADED"),
      document.createTextNode(": the " + d.component + " is retrying (attempt " + d.attempts +
        ", last success " + fmtAge(d.seconds_since_last_success) + " ago): "),
      el("span", "msg", d.error));
  }

  // setNamespaces fills the table of changes committed by namespace.
  function setNamespaces(v, ns, now) {
    if (!ns || ns.length === 0) { v.namespaces.hidden = true; return; }
    v.namespaces.hidden = false;
    const head = el("tr");
    const snapshots = ns.some(n => n.snapshot);
    head.append(el("th", "", "namespace"), el("th", "num", "events"), el("th", "", "last change"));
    if (snapshots) head.append(el("th", "", "snapshot"));
    const rows = [head];
    const t = Date.parse(now);
    for (const n of ns) {
      const tr = el("tr");
      tr.dataset.namespace = n.namespace;
      const last = n.last_change ? fmtAge(Math.max(0, (t - Date.parse(n.last_change)) / 1000)) + " ago" : "—";
      tr.append(el("td", "ns", n.namespace), el("td", "num", fmtNum(n.events, 0)), el("td", "", last));
      if (snapshots) {
        const s = n.snapshot;
        let text = "";
        if (s) {
          text = fmtNum(s.done, 0) + " / " + fmtNum(s.total, 0);
          if (s.total > 0) text += " (" + Math.min(100, Math.floor(100 * s.done / s.total)) + "%)";
        }
        tr.append(el("td", "num snapshot", text));
      }
      rows.push(tr);
    }
    v.namespaces.replaceChildren(...rows);
  }

  function appendHistory(v, h) {
    if (!h) return;
    const d = v.data;
    const lastT = d.t.length ? d.t[d.t.length - 1] : 0;
    for (let i = 0; i < h.t.length; i++) {
      if (h.t[i] <= lastT) continue;
      d.t.push(h.t[i]); d.eps.push(h.events_per_second[i]); d.lag.push(h.lag_seconds[i]);
    }
    const extra = d.t.length - HISTORY;
    if (extra > 0) { d.t.splice(0, extra); d.eps.splice(0, extra); d.lag.splice(0, extra); }
    v.throughput.setData([d.t, d.eps]);
    v.lag.setData([d.t, d.lag]);
    v.lagNote.hidden = d.lag.length === 0 || d.lag.some(x => x !== null);
  }

  function render(rep) {
    for (const p of rep.pipelines) {
      const v = views.get(p.name) || makeView(p.name);
      v.state.textContent = p.state;
      v.state.className = "state " + p.state;
      v.card.dataset.state = p.state;
      v.error.hidden = !p.error;
      v.error.textContent = p.error ? "Failed: " + p.error : "";
      setDegraded(v, p.degraded);
      setNumbers(v, p);
      v.cp.textContent = describeCheckpoint(p.checkpoint);
      setSource(v, p.source);
      setErrors(v, p.errors);
      setNamespaces(v, p.namespaces, rep.time);
      appendHistory(v, p.history);
      if (p.history && p.history.t.length) since = Math.max(since, p.history.t[p.history.t.length - 1]);
    }
  }

  async function poll() {
    try {
      const res = await fetch("/api/status?since=" + since, { cache: "no-store" });
      if (!res.ok) throw new Error(res.status + " " + res.statusText);
      const rep = await res.json();
      render(rep);
      document.getElementById("updated").textContent = "updated " + new Date(rep.time).toLocaleTimeString();
    } catch (e) {
      document.getElementById("updated").textContent = "cannot reach tide: " + e.message;
    }
    setTimeout(poll, 1000);
  }
  poll();
})();
