// ccbench history report: the page's own code. Every text from the data goes in through
// textContent (labels and case names are the user's text), never as HTML.
"use strict";
(function () {
  const data = JSON.parse(document.getElementById("data").textContent);
  const linked = new URLSearchParams(location.hash.slice(1)); // read before the page writes its own
  const $ = (id) => document.getElementById(id);
  const make = (tag, text, cls) => {
    const node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    if (cls) node.className = cls;
    return node;
  };
  // the configuration names the machine first ("label / TEE / storage / transport")
  const name = (s) => [s.config || s.label, s.workload, s.case, s.metric].filter((p) => p).join(" / ");
  const pct = (v) => (v === null || v === undefined ? "?" : (v > 0 ? "+" : "") + v.toFixed(1) + "%");
  let chart = null;
  let current = null;
  let pendingPoint = null;

  // ------------------------------------------------------------------ what moved (first)
  function moved() {
    const rows = [];
    data.series.forEach((s) => s.changes.forEach((c) => rows.push([s, c])));
    rows.sort((a, b) => Math.abs(b[1].percent || 0) - Math.abs(a[1].percent || 0));
    const box = $("moved");
    if (!rows.length) return;
    const table = make("table");
    const head = make("tr");
    ["series", "when", "change", "95% interval", "what changed"].forEach((h) => head.appendChild(make("th", h)));
    table.appendChild(head);
    rows.forEach(([s, c]) => {
      const tr = make("tr", null, "pick");
      tr.dataset.series = s.id;
      tr.appendChild(make("td", name(s)));
      tr.appendChild(make("td", new Date(s.t[c.index] * 1000).toISOString().slice(0, 19) + "Z"));
      const worse = (s.better === "lower" && c.percent > 0) || (s.better === "higher" && c.percent < 0);
      tr.appendChild(make("td", pct(c.percent), worse ? "up" : "down"));
      tr.appendChild(make("td", c.interval ? pct(c.interval[0]) + " to " + pct(c.interval[1]) : ""));
      const causes = Object.entries(c.changed).map(([k, v]) => k + ": " + v[0] + " -> " + v[1]);
      tr.appendChild(make("td", causes.join("; ") || "nothing recorded changed"));
      tr.addEventListener("click", () => select(s.id, true));
      table.appendChild(tr);
    });
    box.appendChild(table);
  }

  // ------------------------------------------------------------------ filters and picker
  function fill(select, key) {
    const values = [...new Set(data.series.map((s) => s[key]))].sort();
    select.appendChild(make("option", "all (" + values.length + ")")).value = "";
    values.forEach((v) => (select.appendChild(make("option", v)).value = v));
  }
  function matching() {
    const label = $("f-label").value, workload = $("f-workload").value, metric = $("f-metric").value;
    const text = $("f-text").value.toLowerCase(), onlyMoved = $("f-moved").checked;
    return data.series.filter(
      (s) =>
        (!label || s.label === label) &&
        (!workload || s.workload === workload) &&
        (!metric || s.metric === metric) &&
        (!text || name(s).toLowerCase().includes(text)) &&
        (!onlyMoved || s.changes.length)
    );
  }
  function refresh() {
    const shown = matching();
    const picker = $("picker");
    picker.replaceChildren();
    shown.forEach((s) => {
      const option = make("option", (s.changes.length ? "\u25B2 " : "") + name(s));
      option.value = s.id;
      picker.appendChild(option);
    });
    $("count").textContent = shown.length + " of " + data.series.length + " series";
    if (shown.length && !shown.some((s) => s.id === current)) select(shown[0].id, false);
    if (!shown.length) {
      current = null;
      if (chart) chart.destroy();
      chart = null;
      $("title").textContent = "no series matches these filters";
    }
    picker.value = current === null ? "" : String(current);
    writeHash();
  }

  // ------------------------------------------------------------------ the chart
  function markChanges(u) {
    const s = data.series[current];
    const ctx = u.ctx;
    ctx.save();
    ctx.setLineDash([6, 4]);
    ctx.strokeStyle = "#a40000";
    ctx.lineWidth = 1.5 * devicePixelRatio;
    s.changes.forEach((c) => {
      const x = u.valToPos(s.t[c.index], "x", true);
      ctx.beginPath();
      ctx.moveTo(x, u.bbox.top);
      ctx.lineTo(x, u.bbox.top + u.bbox.height);
      ctx.stroke();
    });
    ctx.restore();
  }
  function hover(u) {
    const s = data.series[current];
    const i = u.cursor.idx;
    if (i === null || i === undefined || !s) return;
    const run = data.runs[s.run[i]];
    const list = make("dl");
    const add = (k, v) => {
      if (v === null || v === undefined || v === "") return;
      list.appendChild(make("dt", k));
      list.appendChild(make("dd", v));
    };
    add("run", run.id);
    add("started", run.started_at);
    add("median", s.y[i] + " " + s.unit);
    add("samples", s.n[i]);
    add("contended", s.contended[i] ? "yes" : "no");
    Object.keys(run).forEach((k) => k !== "id" && k !== "started_at" && add(k, run[k]));
    $("hover").replaceChildren(make("b", "run " + (i + 1) + " of " + s.t.length), list);
  }
  function pointAt(u) {
    const s = data.series[current];
    if (pendingPoint === null || !s) return;
    const i = pendingPoint;
    pendingPoint = null;
    u.setCursor({ left: u.valToPos(s.t[i], "x"), top: u.valToPos(s.y[i], "y") });
  }
  function draw() {
    const s = data.series[current];
    const contended = s.y.map((v, i) => (s.contended[i] ? v : null));
    const opts = {
      width: Math.max(400, $("main").clientWidth),
      height: 360,
      scales: { x: { time: true } },
      cursor: { drag: { x: true, y: false } },
      series: [
        {},
        { label: s.metric + " (" + s.unit + ")", stroke: "#4477AA", width: 1.5, points: { show: true, size: 6 } },
        { label: "contended", stroke: "#CC6677", fill: undefined, paths: () => null,
          points: { show: true, size: 8, fill: "#fff", stroke: "#CC6677" } },
      ],
      axes: [{}, { label: s.unit }],
      hooks: { draw: [markChanges], setCursor: [hover], ready: [pointAt] },
    };
    if (chart) chart.destroy();
    chart = new uPlot(opts, [s.t, s.y, contended], $("chart"));
  }
  function select(id, scroll) {
    current = id;
    const s = data.series[id];
    $("title").textContent = name(s);
    $("picker").value = String(id);
    const list = $("changes");
    list.replaceChildren();
    if (s.changes.length) {
      const ul = make("ul");
      s.changes.forEach((c) => ul.appendChild(make("li", "change point " + c.text)));
      list.appendChild(ul);
    } else {
      list.appendChild(make("p", s.note || (data.reason ? "change points not computed: " + data.reason : "no change point"), "note"));
    }
    $("hover").replaceChildren(make("span", "hover a point to see its run", "note"));
    draw();
    writeHash();
    if (scroll) $("title").scrollIntoView();
  }

  // ------------------------------------------------------------------ links carry the view
  function writeHash() {
    const parts = [];
    [["label", "f-label"], ["workload", "f-workload"], ["metric", "f-metric"], ["text", "f-text"]].forEach(([k, id]) => {
      if ($(id).value) parts.push(k + "=" + encodeURIComponent($(id).value));
    });
    if ($("f-moved").checked) parts.push("moved=1");
    if (current !== null) parts.push("series=" + current);
    history.replaceState(null, "", "#" + parts.join("&"));
  }
  function readHash() {
    const wanted = linked;
    [["label", "f-label"], ["workload", "f-workload"], ["metric", "f-metric"], ["text", "f-text"]].forEach(([k, id]) => {
      if (wanted.has(k)) {
        $(id).value = wanted.get(k);
        $(id).dispatchEvent(new Event("change"));
      }
    });
    if (wanted.get("moved") === "1") {
      $("f-moved").checked = true;
      $("f-moved").dispatchEvent(new Event("change"));
    }
    const id = Number(wanted.get("series"));
    if (wanted.has("series") && data.series[id] && matching().includes(data.series[id])) select(id, false);
    // a link to one run: the cursor put on it, as if hovered, once the chart has its scales
    const point = Number(wanted.get("point"));
    if (wanted.has("point") && current !== null && point >= 0 && point < data.series[current].t.length) {
      pendingPoint = point;
      draw();
    }
  }

  fill($("f-label"), "label");
  fill($("f-workload"), "workload");
  fill($("f-metric"), "metric");
  ["f-label", "f-workload", "f-metric", "f-moved"].forEach((id) => $(id).addEventListener("change", refresh));
  $("f-text").addEventListener("input", refresh);
  $("picker").addEventListener("change", () => select(Number($("picker").value), false));
  moved();
  const first = data.series.slice().sort((a, b) => b.changes.length - a.changes.length)[0];
  if (first) current = first.id;
  refresh();
  if (first) select(current, false);
  readHash();
  window.addEventListener("resize", () => current !== null && draw());
  document.body.dataset.ready = "1";
})();
