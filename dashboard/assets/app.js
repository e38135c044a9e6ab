// The sluice dashboard: polls "data" beside this page about once an
// interval and draws what it says. No library, nothing from other hosts.
'use strict';

(() => {
  const MAX_POINTS = 300;
  const COLORS = {
    green: '#1f9d55', red: '#d64545', amber: '#d08a16', blue: '#2f6fde',
    violet: '#7a4fd6', teal: '#14958f', grey: '#8a91a0', ink: '#1d2330',
  };
  const LANE_COLORS = [COLORS.blue, COLORS.amber, COLORS.violet, COLORS.teal, COLORS.green, COLORS.red, COLORS.grey];

  const state = {
    instance: null,
    seq: 0,
    samples: [],
    interval: 1000,
    controlsBuilt: '',
    draws: 0,
    timer: 0,
  };

  const $ = (id) => document.getElementById(id);

  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === 'class') e.className = v;
      else if (k === 'text') e.textContent = v;
      else e.setAttribute(k, v);
    }
    for (const c of children) e.append(c);
    return e;
  }

  // Number formatting: a few significant digits, no noise.
  function fmt(v, digits) {
    if (v === null || v === undefined || !isFinite(v)) return '—';
    const d = digits === undefined ? 3 : digits;
    const a = Math.abs(v);
    if (a >= 1000) return Math.round(v).toLocaleString('en-US');
    if (a >= 100) return v.toFixed(0);
    if (a >= 10) return v.toFixed(Math.max(0, d - 2));
    if (a === 0) return '0';
    return v.toFixed(Math.max(1, d - 1));
  }
  const pct = (v) => (isFinite(v) ? (100 * v).toFixed(v >= 0.1 || v === 0 ? 0 : 1) + '%' : '—');

  // ---- charts -------------------------------------------------------

  // A chart draws its series, one value per sample, on a canvas sized to
  // its box; min and max fix the scale (max grows to fit the data).
  class Chart {
    constructor(id, series, opts) {
      this.canvas = $('chart-' + id);
      this.legend = $('legend-' + id);
      this.opts = opts || {};
      this.setSeries(series);
    }

    setSeries(series) {
      this.series = series;
      this.legend.replaceChildren();
      for (const s of series) {
        const sw = el('span', { class: 'swatch' + (s.dashed ? ' dashed' : '') });
        if (s.dashed) sw.style.borderColor = s.color; else sw.style.background = s.color;
        this.legend.append(el('span', { class: 'key' }, sw, s.label));
      }
    }

    draw(samples) {
      const c = this.canvas;
      const dpr = window.devicePixelRatio || 1;
      const w = Math.max(1, Math.round(c.clientWidth * dpr));
      const h = Math.max(1, Math.round(c.clientHeight * dpr));
      if (c.width !== w || c.height !== h) { c.width = w; c.height = h; }
      const g = c.getContext('2d');
      g.setTransform(dpr, 0, 0, dpr, 0, 0);
      const W = c.clientWidth, H = c.clientHeight;
      g.clearRect(0, 0, W, H);

      const left = 44, right = 8, top = 8, bottom = 18;
      const pw = W - left - right, ph = H - top - bottom;
      const values = this.series.map((s) => samples.map(s.value));
      // The scale: the data's largest value with a little room, or the
      // chart's own limit (1 for a fraction, the workers), whichever is
      // larger, rounded up to four nice steps.
      let peak = 0;
      for (const vs of values) for (const v of vs) if (isFinite(v) && v > peak) peak = v;
      const last = samples[samples.length - 1];
      const limit = Math.max(this.opts.max || 0, this.opts.maxOf && last ? this.opts.maxOf(last) || 0 : 0);
      const max = limit > 0 && peak <= limit ? limit : 4 * niceCeil(Math.max(peak * 1.1, this.opts.floor || 0, 1e-9) / 4);

      // Grid and y labels.
      g.font = '11px system-ui, sans-serif';
      g.fillStyle = '#6b7385';
      g.strokeStyle = '#e2e5eb';
      g.lineWidth = 1;
      g.textAlign = 'right';
      g.textBaseline = 'middle';
      for (let i = 0; i <= 4; i++) {
        const y = top + ph - (ph * i) / 4;
        g.beginPath(); g.moveTo(left, y + 0.5); g.lineTo(left + pw, y + 0.5); g.stroke();
        const v = (max * i) / 4;
        g.fillText(this.opts.percent ? Math.round(v * 100) + '%' : tick(v), left - 6, y);
      }
      // x labels: time ago, one sample per interval.
      g.textAlign = 'center';
      g.textBaseline = 'alphabetic';
      const span = MAX_POINTS;
      const xAt = (i, n) => left + pw - ((n - 1 - i) / (span - 1)) * pw;
      for (const ago of [0, 60, 120, 180, 240]) {
        const x = left + pw - (ago / (span - 1)) * pw;
        const secs = Math.round((ago * state.interval) / 1000);
        g.fillText(ago === 0 ? 'now' : '-' + secs + 's', x, H - 4);
      }

      const n = samples.length;
      let points = 0;
      this.series.forEach((s, k) => {
        const vs = values[k];
        g.strokeStyle = s.color;
        g.lineWidth = s.width || 1.6;
        g.setLineDash(s.dashed ? [5, 4] : []);
        g.beginPath();
        let pen = false;
        for (let i = 0; i < n; i++) {
          const v = vs[i];
          if (!isFinite(v)) { pen = false; continue; }
          const x = xAt(i, n);
          const y = top + ph - (Math.min(v, max) / max) * ph;
          if (pen) g.lineTo(x, y); else g.moveTo(x, y);
          pen = true;
          points++;
        }
        g.stroke();
      });
      g.setLineDash([]);
      c.dataset.points = String(points);
      c.dataset.draws = String((Number(c.dataset.draws) || 0) + 1);
    }
  }

  function niceCeil(v) {
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    for (const m of [1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10]) if (m * p >= v * (1 - 1e-9)) return m * p;
    return 10 * p;
  }

  // tick prints an axis value: three significant digits at most.
  function tick(v) {
    if (v >= 1000) return Math.round(v).toLocaleString('en-US');
    return String(Number(v.toPrecision(3)));
  }

  const charts = {
    workers: new Chart('workers', [
      { label: 'busy (mean over the second)', color: COLORS.blue, value: (s) => s.busy_mean },
      { label: 'busy now', color: COLORS.teal, value: (s) => s.busy, width: 1 },
      { label: 'workers', color: COLORS.ink, value: (s) => s.workers, dashed: true, width: 1 },
    ], { floor: 1, maxOf: (s) => s.workers }),
    requests: new Chart('requests', [
      { label: 'admitted', color: COLORS.green, value: (s) => s.admitted },
      { label: 'rejected', color: COLORS.red, value: (s) => s.rejected },
      { label: 'queued', color: COLORS.amber, value: (s) => s.queued },
    ]),
    wait: new Chart('wait', [
      { label: 'p50', color: COLORS.green, value: (s) => (s.wait.n ? s.wait.p50 : NaN) },
      { label: 'p90', color: COLORS.amber, value: (s) => (s.wait.n ? s.wait.p90 : NaN) },
      { label: 'p99', color: COLORS.red, value: (s) => (s.wait.n ? s.wait.p99 : NaN) },
      { label: 'age limit', color: COLORS.ink, value: (s) => (s.max_age > 0 ? s.max_age : NaN), dashed: true, width: 1 },
    ]),
    latency: new Chart('latency', [
      { label: 'p50', color: COLORS.green, value: (s) => (s.latency.n ? s.latency.p50 : NaN) },
      { label: 'p90', color: COLORS.amber, value: (s) => (s.latency.n ? s.latency.p90 : NaN) },
      { label: 'p99', color: COLORS.red, value: (s) => (s.latency.n ? s.latency.p99 : NaN) },
    ]),
    closed: new Chart('closed', [
      { label: 'gates closed', color: COLORS.red, value: (s) => s.closed },
    ], { max: 1, percent: true }),
    lanes: new Chart('lanes', [], { floor: 0.1 }),
  };

  // ---- rendering ----------------------------------------------------

  function render(data) {
    const ss = state.samples;
    const last = ss[ss.length - 1];
    laneSeries(last);
    for (const ch of Object.values(charts)) ch.draw(ss);
    state.draws++;
    document.body.dataset.samples = String(ss.length);
    document.body.dataset.draws = String(state.draws);
    $('footer-samples').textContent = String(ss.length);
    if (last) {
      $('big-workers').textContent = fmt(last.busy_mean, 2) + ' / ' + last.workers + ' busy';
      if (!last.workers) $('big-workers').textContent = 'no executor';
      $('big-requests').textContent = fmt(last.admitted) + ' in · ' + fmt(last.rejected) + ' out';
      $('big-wait').textContent = last.wait.n ? 'p99 ' + fmt(last.wait.p99) + ' ms' : '—';
      $('big-latency').textContent = last.latency.n ? 'p99 ' + fmt(last.latency.p99) + ' ms' : '—';
      const recent = ss.slice(-30);
      const secs = recent.reduce((a, s) => a + s.dt, 0);
      const mean = recent.reduce((a, s) => a + s.closed * s.dt, 0) / Math.max(1e-9, secs);
      $('big-closed').textContent = pct(mean) + ' over ' + fmt(secs, 2) + ' s';
      $('fact-inflight').textContent = String(last.in_flight);
      $('fact-queue').textContent = String(last.queue_len);
      $('fact-conns').textContent = last.conns >= 0 ? String(last.conns) : '—';
      $('fact-standing').textContent = last.standing ? 'standing' : 'moving';
      const badge = $('agebadge');
      if (last.max_age > 0) {
        badge.textContent = (last.standing ? 'standing line: age limit ' : 'age limit ') + fmt(last.max_age) + ' ms';
      } else {
        badge.textContent = 'no age limit';
      }
      badge.classList.toggle('standing', !!last.standing);
      laneTable(last);
      reasonTable(last);
    }
    tenants(data.tenants);
    controls(data);
  }

  function laneSeries(last) {
    const names = last && last.lanes ? last.lanes.map((l) => l.name) : [];
    const key = names.join('\n');
    if (charts.lanes.key === key) return;
    charts.lanes.key = key;
    charts.lanes.setSeries(names.map((name, i) => ({
      label: name,
      color: LANE_COLORS[i % LANE_COLORS.length],
      value: (s) => {
        const l = (s.lanes || []).find((x) => x.name === name);
        return l ? l.busy : NaN;
      },
    })));
  }

  function fillBody(table, rows, cols) {
    const body = $(table).tBodies[0];
    body.replaceChildren();
    if (!rows.length) {
      body.append(el('tr', {}, el('td', { class: 'empty', colspan: String(cols), text: 'none' })));
      return;
    }
    for (const r of rows) body.append(el('tr', {}, ...r.map((c) => (c instanceof Node ? el('td', {}, c) : el('td', { text: c })))));
  }

  function laneTable(last) {
    fillBody('table-lanes', (last.lanes || []).map((l) => [l.name, fmt(l.tasks), fmt(l.busy, 2), fmt(l.wait), String(l.queued)]), 5);
  }

  function reasonTable(last) {
    const rows = Object.entries(last.rejected_by || {}).sort((a, b) => b[1] - a[1]).map(([why, r]) => [why, fmt(r)]);
    fillBody('table-reasons', rows, 2);
  }

  function shareCell(v, cls) {
    const bar = el('span', { class: 'bar' + (cls ? ' ' + cls : '') });
    bar.style.width = Math.round(60 * Math.max(0, Math.min(1, v))) + 'px';
    const cell = el('span', {}, bar, pct(v));
    return cell;
  }

  function tenants(t) {
    const card = $('card-tenants');
    if (!t) { card.hidden = true; return; }
    card.hidden = false;
    $('tenant-window').textContent = String(t.window);
    $('big-tenants').textContent = (t.enforcing ? 'enforcing' : 'not enforcing') + (t.version ? ' · table v' + t.version : '');
    fillBody('table-tenants', (t.rows || []).map((r) => [
      r.tenant, fmt(r.requests), shareCell(r.share), pct(r.admitted_share), pct(r.blame_share),
      shareCell(r.drop, 'drop'), pct(r.dropped),
    ]), 7);
  }

  // ---- controls -----------------------------------------------------

  function controls(data) {
    $('controls-off').hidden = !!data.controls;
    const key = JSON.stringify([data.controls, (data.knobs || []).map((k) => k.name), (data.lanes || []).map((l) => l.name), !!data.tenants]);
    if (state.controlsBuilt !== key) {
      state.controlsBuilt = key;
      buildControls(data);
    }
    // Show the values in force where the user is not typing.
    (data.knobs || []).forEach((k, i) => setValue('knob-' + i, k.value));
    (data.lanes || []).forEach((l, i) => setValue('lane-' + i, l.shares));
    const enf = $('control-enforce');
    if (enf && data.tenants) enf.checked = !!data.tenants.enforcing;
  }

  // setValue shows the value in force in an input, unless the user has
  // typed another one there that is not sent yet.
  function setValue(id, v) {
    const input = document.getElementById(id);
    if (!input || document.activeElement === input) return;
    if (input.dataset.shown !== undefined && input.value !== input.dataset.shown) return;
    input.value = String(v);
    input.dataset.shown = input.value;
  }

  function buildControls(data) {
    const box = $('controls');
    box.replaceChildren();
    const on = !!data.controls;
    const numeric = (id, label, unit, attrs, send) => {
      const input = el('input', Object.assign({ id, type: 'number', 'aria-label': label }, attrs));
      const button = el('button', { type: 'button', text: 'Set' });
      input.disabled = button.disabled = !on;
      const go = () => { input.dataset.shown = input.value; send(Number(input.value)); };
      button.addEventListener('click', go);
      input.addEventListener('keydown', (e) => { if (e.key === 'Enter') go(); });
      return el('div', { class: 'control' }, el('label', { for: id, text: label }), input, el('span', { text: unit || '' }), button);
    };
    (data.knobs || []).forEach((k, i) => {
      const attrs = { min: String(k.min) };
      if (k.max) attrs.max = String(k.max);
      if (k.step) attrs.step = String(k.step);
      box.append(numeric('knob-' + i, k.name, k.unit, attrs, (v) => send({ knob: k.name, value: v })));
    });
    (data.lanes || []).forEach((l, i) => {
      box.append(numeric('lane-' + i, l.name + ' shares', '', { min: '1', step: '1' }, (v) => send({ lane: l.name, shares: v })));
    });
    if (data.tenants) {
      const box2 = el('input', { id: 'control-enforce', type: 'checkbox' });
      box2.disabled = !on;
      box2.addEventListener('change', () => send({ enforce: box2.checked }));
      box.append(el('div', { class: 'control' }, box2, el('label', { for: 'control-enforce', text: 'enforce tenant drops' })));
    }
  }

  async function send(change) {
    const out = $('control-result');
    try {
      const r = await fetch('control', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify(change),
        cache: 'no-store',
      });
      const text = await r.text();
      if (!r.ok) throw new Error(text.trim() || 'HTTP ' + r.status);
      const res = JSON.parse(text);
      out.className = 'result';
      out.textContent = res.what + ': ' + res.from + ' → ' + res.to;
    } catch (e) {
      out.className = 'result error';
      out.textContent = String(e.message || e);
    }
  }

  // ---- polling ------------------------------------------------------

  function setStatus(text, cls) {
    const s = $('status');
    s.textContent = text;
    s.className = 'status ' + cls;
  }

  async function poll() {
    let data;
    try {
      const r = await fetch('data?after=' + state.seq, { cache: 'no-store' });
      if (!r.ok) throw new Error('HTTP ' + r.status);
      data = await r.json();
    } catch (e) {
      setStatus('waiting for the server…', 'down');
      schedule(state.interval);
      return;
    }
    if (data.instance !== state.instance) {
      // A new server (or a restarted one): start the charts over.
      const first = state.instance === null;
      state.instance = data.instance;
      state.samples = [];
      state.seq = 0;
      document.title = data.title + ' · sluice dashboard';
      if (!first) { schedule(0); return; }
    }
    state.interval = data.interval_ms || 1000;
    for (const s of data.samples) {
      if (s.seq > state.seq) { state.samples.push(s); state.seq = s.seq; }
    }
    if (state.samples.length > MAX_POINTS) state.samples.splice(0, state.samples.length - MAX_POINTS);
    setStatus(state.samples.length ? 'live' : 'collecting…', state.samples.length ? 'live' : 'wait');
    render(data);
    schedule(state.interval);
  }

  function schedule(ms) {
    clearTimeout(state.timer);
    state.timer = setTimeout(poll, ms);
  }

  window.addEventListener('resize', () => { for (const ch of Object.values(charts)) ch.draw(state.samples); });
  poll();
})();
