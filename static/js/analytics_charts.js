/* The analytics dashboard's charts (Chart.js, vendored in static/vendor/chartjs).
 *
 * The headline comes with the page; each section arrives by htmx when it is opened. A
 * chart's data is in a <script type="application/json"> (Django's json_script, never
 * executed) whose id the nearest [data-charts] ancestor names, and every
 * <canvas data-chart="KIND" data-index="N"> draws entry N of data[KIND]
 * (analytics/report/chart_data.py builds them). Labels are drawn on the canvas as text, so
 * names from the data are never parsed as HTML. The tables of the page carry the same
 * numbers for readers who cannot see the charts.
 *
 * A long label (an axis or radar label, a legend entry) is cut on the canvas; it keeps its
 * full name: pointing at it puts the name in the canvas's title (the browser's tooltip),
 * and the canvas's accessible name (aria-label) lists the cut names in full.
 *
 * A dataset may carry `links` (a URL per point, analytics/report/figure_links.py): clicking
 * its bar or point opens the responses behind it. The table beside the chart has the same
 * links, for the keyboard. A dashboard address naming a section (#heatmaps: the drill-down
 * page's "back to the figure") opens that section.
 */
(function () {
  "use strict";

  var HUMANS = "#1d2329";
  // Okabe-Ito: distinguishable with the common colour-vision deficiencies
  var PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#D55E00", "#56B4E9", "#F0E442"];
  // past seven judges the colours repeat with a hatched look (a dashed border)
  var DASHES = [[], [5, 3], [2, 2]];
  // a label longer than this is cut on the canvas; the tooltip shows it whole
  var SHORT = 18;
  // legend entries have more room
  var LEGEND_SHORT = 32;

  function cut(label, most) {
    var text = String(label);
    return text.length > most ? text.slice(0, most - 1) + "…" : text;
  }

  function shorten(label) {
    return cut(label, SHORT);
  }

  function alpha(hex, a) {
    var n = parseInt(hex.slice(1), 16);
    return "rgba(" + (n >> 16) + "," + ((n >> 8) & 255) + "," + (n & 255) + "," + a + ")";
  }

  function fixed(v) {
    return v === null || v === undefined ? "—" : Number(v).toFixed(3);
  }

  function styled(datasets, fill) {
    var judge = 0;
    return datasets.map(function (d) {
      var k = d.label === "Humans" ? -1 : judge++;
      var c = k < 0 ? HUMANS : PALETTE[k % PALETTE.length];
      return Object.assign({}, d, {
        borderColor: c,
        backgroundColor: alpha(c, fill),
        pointBackgroundColor: c,
        borderWidth: 2,
        borderDash: k < 0 ? [] : DASHES[Math.floor(k / PALETTE.length) % DASHES.length],
      });
    });
  }

  function tooltipTitle(items) {
    return items.length ? String(items[0].label) : "";
  }

  function valueScale(scale) {
    var axis = { beginAtZero: false };
    if (scale && scale.min !== undefined) {
      axis.suggestedMin = scale.min;
      axis.suggestedMax = scale.max;
    }
    return axis;
  }

  function shortTick(value) {
    return shorten(this.getLabelForValue(value));
  }

  function tooltipValue(ctx) {
    return ctx.dataset.label + ": " + fixed(ctx.raw);
  }

  // Vertical error bars for datasets carrying `errors` ([low, high] or null per bar or
  // point), drawn over the bars (the human ceiling's marks have theirs too).
  var errorBars = {
    id: "flaskwebErrorBars",
    afterDatasetsDraw: function (chart) {
      var ctx = chart.ctx;
      var y = chart.scales.y;
      chart.data.datasets.forEach(function (ds, i) {
        if (!ds.errors || !chart.isDatasetVisible(i)) return;
        chart.getDatasetMeta(i).data.forEach(function (bar, k) {
          var e = ds.errors[k];
          if (!e) return;
          var top = y.getPixelForValue(e[1]);
          var bottom = y.getPixelForValue(e[0]);
          var w = Math.max(2, Math.min(6, (bar.width || 8) / 4));
          ctx.save();
          ctx.strokeStyle = ds.errorColor || HUMANS;
          ctx.lineWidth = 1.5;
          ctx.beginPath();
          ctx.moveTo(bar.x, top);
          ctx.lineTo(bar.x, bottom);
          ctx.moveTo(bar.x - w, top);
          ctx.lineTo(bar.x + w, top);
          ctx.moveTo(bar.x - w, bottom);
          ctx.lineTo(bar.x + w, bottom);
          ctx.stroke();
          ctx.restore();
        });
      });
    },
  };

  function radarConfig(spec) {
    if (spec.kind !== "radar") return barConfig(spec);
    var r = valueScale(spec.scale);
    return {
      type: "radar",
      data: { labels: spec.labels, datasets: styled(spec.datasets, 0.12) },
      options: {
        maintainAspectRatio: false,
        scales: {
          r: Object.assign(r, {
            // long skill names are cut so that they do not run into each other
            pointLabels: { font: { size: 11 }, padding: 6, callback: shorten },
          }),
        },
        plugins: {
          legend: { labels: { generateLabels: shortLegend } },
          tooltip: { callbacks: { title: tooltipTitle, label: tooltipValue } },
        },
      },
    };
  }

  function barConfig(spec) {
    return {
      type: "bar",
      data: { labels: spec.labels, datasets: styled(spec.datasets, 0.75) },
      options: {
        maintainAspectRatio: false,
        scales: { x: { ticks: { callback: shortTick } }, y: valueScale(spec.scale) },
        plugins: {
          legend: { labels: { generateLabels: shortLegend } },
          tooltip: { callbacks: { title: tooltipTitle, label: tooltipValue } },
        },
      },
    };
  }

  // The headline: per skill (x), each judge's correlation with its interval, and the human
  // ceiling as a black mark with its own interval.
  function headlineConfig(spec) {
    var datasets = styled(spec.datasets, 0.75);
    if (spec.ceiling) {
      datasets.push({
        type: "line",
        label: "Human ceiling (leave-one-out)",
        data: spec.ceiling,
        errors: spec.ceiling_errors,
        errorColor: "#6a737d",
        links: spec.ceiling_links,
        showLine: false,
        pointStyle: "line",
        pointRadius: 16,
        pointHoverRadius: 18,
        borderWidth: 3,
        borderColor: HUMANS,
        backgroundColor: HUMANS,
      });
    }
    return {
      type: "bar",
      data: { labels: spec.labels, datasets: datasets },
      plugins: [errorBars],
      options: {
        maintainAspectRatio: false,
        scales: {
          x: { ticks: { callback: shortTick } },
          y: { min: -1, max: 1, title: { display: true, text: spec.title } },
        },
        plugins: {
          legend: { labels: { generateLabels: shortLegend } },
          tooltip: {
            callbacks: {
              title: tooltipTitle,
              label: function (ctx) {
                var e = ctx.dataset.errors && ctx.dataset.errors[ctx.dataIndex];
                var ci = e ? " [" + fixed(e[0]) + ", " + fixed(e[1]) + "]" : "";
                return ctx.dataset.label + ": " + fixed(ctx.raw) + ci;
              },
            },
          },
        },
      },
    };
  }

  // Legend entries with long judge names cut (the tooltip and the table have them whole).
  function shortLegend(chart) {
    var items = window.Chart.defaults.plugins.legend.labels.generateLabels(chart);
    items.forEach(function (item) {
      item.text = cut(item.text, LEGEND_SHORT);
    });
    return items;
  }

  function inside(box, x, y) {
    return box && x >= box.left && x <= box.right && y >= box.top && y <= box.bottom;
  }

  // The full name of the cut label under the pointer, or "": an x-axis tick, a radar
  // label or a legend entry.
  function cutNameAt(chart, x, y) {
    var labels = chart.data.labels || [];
    var axis = chart.scales.x;
    if (axis && axis.type === "category" && inside(axis, x, y)) {
      var label = labels[axis.getValueForPixel(x)];
      if (label !== undefined && shorten(label) !== String(label)) return String(label);
    }
    var radar = chart.scales.r;
    if (radar && radar.getPointLabelPosition) {
      for (var i = 0; i < labels.length; i++) {
        if (inside(radar.getPointLabelPosition(i), x, y) && shorten(labels[i]) !== String(labels[i])) {
          return String(labels[i]);
        }
      }
    }
    var legend = chart.legend;
    if (legend && legend.legendHitBoxes && inside(legend, x, y)) {
      for (var k = 0; k < legend.legendHitBoxes.length; k++) {
        var hit = legend.legendHitBoxes[k];
        var item = legend.legendItems[k];
        var box = { left: hit.left, top: hit.top, right: hit.left + hit.width, bottom: hit.top + hit.height };
        var dataset = item && chart.data.datasets[item.datasetIndex];
        if (dataset && inside(box, x, y) && item.text !== String(dataset.label)) {
          return String(dataset.label);
        }
      }
    }
    return "";
  }

  // Pointing at a cut label shows its full name (the canvas's title: the browser's tooltip).
  var fullNames = {
    id: "flaskwebFullNames",
    afterEvent: function (chart, args) {
      var event = args.event;
      var canvas = chart.canvas;
      if (event.type === "mouseout") {
        canvas.removeAttribute("title");
        return;
      }
      if (event.type !== "mousemove") return;
      var name = cutNameAt(chart, event.x, event.y);
      if (name) canvas.setAttribute("title", name);
      else canvas.removeAttribute("title");
    },
  };

  // The canvas's accessible name lists in full every name the chart cuts.
  function nameCutLabels(canvas, chart) {
    var names = [];
    (chart.data.labels || []).forEach(function (label) {
      if (shorten(label) !== String(label)) names.push(String(label));
    });
    chart.data.datasets.forEach(function (d) {
      if (d.label !== undefined && cut(d.label, LEGEND_SHORT) !== String(d.label)) {
        names.push(String(d.label));
      }
    });
    var base = canvas.dataset.label || canvas.getAttribute("aria-label") || "";
    canvas.dataset.label = base;
    canvas.setAttribute(
      "aria-label",
      names.length ? base + " Names cut on the chart, in full: " + names.join("; ") + "." : base
    );
  }

  // A chart with many bars gets wider than its box and scrolls inside it.
  function widen(canvas, spec) {
    var bars = (spec.labels || []).length * ((spec.datasets || []).length + 1);
    var box = canvas.parentNode;
    if (bars > 40 && box && box.classList.contains("chart-box")) {
      box.style.minWidth = bars * 14 + "px";
    }
  }

  // The link of the bar or point under the pointer, or "".
  function linkAt(chart, event) {
    var hit = chart.getElementsAtEventForMode(event, "nearest", { intersect: true }, true)[0];
    var dataset = hit && chart.data.datasets[hit.datasetIndex];
    var value = dataset && dataset.data[hit.index];
    var url = dataset && dataset.links && dataset.links[hit.index];
    return url && value !== null && value !== undefined ? url : "";
  }

  // Clicking a bar or point opens its responses; the pointer says which ones can be.
  function linked(config) {
    config.options = config.options || {};
    config.options.onClick = function (event, elements, chart) {
      var url = linkAt(chart, event);
      if (url) window.location.assign(url);
    };
    config.options.onHover = function (event, elements, chart) {
      chart.canvas.style.cursor = linkAt(chart, event) ? "pointer" : "";
    };
    return config;
  }

  var BUILDERS = {
    radar: radarConfig,
    domain: barConfig,
    difficulty: barConfig,
    headline: headlineConfig,
  };

  function init(root) {
    var Chart = window.Chart;
    if (!Chart) return;
    var sources = {};
    function data(canvas) {
      var holder = canvas.closest("[data-charts]");
      var id = holder ? holder.dataset.charts : "dashboard-charts";
      if (!(id in sources)) {
        var source = document.getElementById(id);
        sources[id] = source ? JSON.parse(source.textContent) : {};
      }
      return sources[id];
    }
    (root || document).querySelectorAll("canvas[data-chart]").forEach(function (canvas) {
      if (Chart.getChart(canvas)) return;
      var kind = canvas.dataset.chart;
      var spec = (data(canvas)[kind] || [])[Number(canvas.dataset.index)];
      if (!spec || !BUILDERS[kind]) return;
      if (kind === "headline") widen(canvas, spec);
      var config = linked(BUILDERS[kind](spec));
      config.plugins = (config.plugins || []).concat([fullNames]);
      nameCutLabels(canvas, new Chart(canvas, config));
    });
  }

  // The dashboard's address names a section (#heatmaps): open it (htmx loads it on toggle)
  // and bring it into view.
  function openNamedSection() {
    var name = window.location.hash.slice(1);
    if (!/^[a-z_]+$/.test(name)) return;
    var section = document.querySelector("details[data-section=" + name + "]");
    if (!section) return;
    section.open = true;
    section.scrollIntoView();
  }

  // A section that could not be loaded says so in its place.
  function failed(event) {
    var target = event.detail && event.detail.elt;
    var status = target && target.querySelector("[data-report-loading] [role=status]");
    if (!status) return;
    var code = event.detail.xhr ? " (" + event.detail.xhr.status + ")" : "";
    status.textContent = "This section could not be loaded" + code + ". Reload the page to try again.";
    status.classList.add("error");
  }

  if (window.Chart) {
    window.Chart.defaults.font.family = getComputedStyle(document.body).fontFamily;
    window.Chart.defaults.color = HUMANS;
    window.Chart.defaults.plugins.legend.position = "bottom";
    window.Chart.defaults.plugins.legend.labels.boxWidth = 14;
  }
  // htmx:load fires for the page at start and for every piece of content htmx swaps in.
  document.addEventListener("htmx:load", function (event) {
    init(event.detail.elt);
  });
  document.addEventListener("DOMContentLoaded", function () {
    init(document);
    openNamedSection();
  });
  document.addEventListener("htmx:responseError", failed);
  document.addEventListener("htmx:sendError", failed);
})();
