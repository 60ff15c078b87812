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
  // a series without its configuration, which its group in the picker names once
  const short = (s) => [s.workload, s.case, s.metric].filter((p) => p).join(" / ");
  const single = (s) => s.t.length < 2;
  let chart = null;
  let current = null;
  let pendingPoint = null;

  // ------------------------------------------------------------------ what moved (first)
  // the page lists it (one line per series that moved, under its configuration): a click shows its chart
  function moved() {
    document.querySelectorAll("#moved li.pick").forEach((item) =>
      item.addEventListener("click", (event) => {
        event.stopPropagation();
        const s = data.series[Number(item.dataset.series)];
        if (s && !matching().includes(s)) {
          ["f-label", "f-workload", "f-metric", "f-text"].forEach((id) => ($(id).value = ""));
          $("f-moved").checked = false;
          $("f-single").checked = true;
          refresh();
        }
        select(Number(item.dataset.series), true);
      })
    );
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
    const withSingle = $("f-single").checked;
    return data.series.filter(
      (s) =>
        (!label || s.label === label) &&
        (!workload || s.workload === workload) &&
        (!metric || s.metric === metric) &&
        (!text || name(s).toLowerCase().includes(text)) &&
        (!onlyMoved || s.changes.length) &&
        (withSingle || !single(s))
    );
  }
  function refresh() {
    const shown = matching();
    const picker = $("picker");
    picker.replaceChildren();
    const groups = new Map();
    shown.forEach((s) => {
      const config = s.config || s.label;
      if (!groups.has(config)) groups.set(config, picker.appendChild(make("optgroup")));
      groups.get(config).label = config;
      const option = make("option", (s.changes.length ? "\u25B2 " : "") + short(s));
      option.value = s.id;
      groups.get(config).appendChild(option);
    });
    const hidden = $("f-single").checked ? 0 : data.series.filter(single).length;
    $("count").textContent =
      shown.length + " of " + data.series.length + " series" +
      (hidden ? "; " + hidden + " of one run not listed (none can move: tick 'series of one run')" : "");
    if (shown.length && !shown.some((s) => s.id === current)) select(shown[0].id, false);
    if (!shown.length) {
      current = null;
      if (chart) chart.destroy();
      chart = null;
      $("title").textContent =
        hidden && hidden === data.series.length
          ? "every series has one run: nothing to draw over time yet (add later runs with ccbench history add)"
          : "no series matches these filters";
      $("changes").replaceChildren();
      $("hover").replaceChildren();
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
    add("median", s.ytext[i]);
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
    if ($("f-single").checked) parts.push("single=1");
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
    [["moved", "f-moved"], ["single", "f-single"]].forEach(([k, id]) => {
      if (wanted.get(k) === "1") {
        $(id).checked = true;
        $(id).dispatchEvent(new Event("change"));
      }
    });
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
  ["f-label", "f-workload", "f-metric", "f-moved", "f-single"].forEach((id) => $(id).addEventListener("change", refresh));
  $("f-text").addEventListener("input", refresh);
  $("picker").addEventListener("change", () => select(Number($("picker").value), false));
  moved();
  const first = data.series.filter((s) => !single(s)).sort((a, b) => b.changes.length - a.changes.length)[0];
  if (first) current = first.id;
  refresh();
  if (current !== null) select(current, false);
  readHash();
  window.addEventListener("resize", () => current !== null && draw());
  document.body.dataset.ready = "1";
})();
