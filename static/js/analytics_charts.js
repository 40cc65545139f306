/* The analytics dashboard's charts (Chart.js, vendored in static/vendor/chartjs).
 *
 * The report section arrives by htmx; its data is in <script id="dashboard-charts"
 * type="application/json"> (Django's json_script, never executed) and every
 * <canvas data-chart="KIND" data-index="N"> draws entry N of data[KIND]
 * (analytics/report/chart_data.py builds them). Labels are drawn on the canvas as text, so
 * names from the data are never parsed as HTML. The tables of the page carry the same
 * numbers for readers who cannot see the charts.
 */
(function () {
  "use strict";

  var HUMANS = "#1d2329";
  // Okabe-Ito: distinguishable with the common colour-vision deficiencies
  var PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#D55E00", "#56B4E9", "#F0E442"];

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
      var c = d.label === "Humans" ? HUMANS : PALETTE[judge++ % PALETTE.length];
      return Object.assign({}, d, {
        borderColor: c,
        backgroundColor: alpha(c, fill),
        pointBackgroundColor: c,
        borderWidth: 2,
      });
    });
  }

  function valueScale(scale) {
    var axis = { beginAtZero: false };
    if (scale && scale.min !== undefined) {
      axis.suggestedMin = scale.min;
      axis.suggestedMax = scale.max;
    }
    return axis;
  }

  function tooltipValue(ctx) {
    return ctx.dataset.label + ": " + fixed(ctx.raw);
  }

  // Vertical error bars for bar datasets carrying `errors` ([low, high] or null per bar).
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
          ctx.strokeStyle = HUMANS;
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
        scales: { r: r },
        plugins: { tooltip: { callbacks: { label: tooltipValue } } },
      },
    };
  }

  function barConfig(spec) {
    return {
      type: "bar",
      data: { labels: spec.labels, datasets: styled(spec.datasets, 0.75) },
      options: {
        maintainAspectRatio: false,
        scales: { y: valueScale(spec.scale) },
        plugins: { tooltip: { callbacks: { label: tooltipValue } } },
      },
    };
  }

  function correlationConfig(spec) {
    var datasets = styled(spec.datasets, 0.75);
    if (spec.ceiling) {
      datasets.push({
        type: "line",
        label: "Human ceiling (leave-one-out)",
        data: spec.ceiling,
        showLine: false,
        pointStyle: "line",
        pointRadius: 14,
        pointHoverRadius: 16,
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
        scales: { y: { min: -1, max: 1, title: { display: true, text: spec.title } } },
        plugins: {
          tooltip: {
            callbacks: {
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

  var BUILDERS = {
    radar: radarConfig,
    domain: barConfig,
    difficulty: barConfig,
    correlation: correlationConfig,
  };

  function init(root) {
    var Chart = window.Chart;
    var source = document.getElementById("dashboard-charts");
    if (!Chart || !source) return;
    var data = JSON.parse(source.textContent);
    (root || document).querySelectorAll("canvas[data-chart]").forEach(function (canvas) {
      if (Chart.getChart(canvas)) return;
      var kind = canvas.dataset.chart;
      var spec = (data[kind] || [])[Number(canvas.dataset.index)];
      if (!spec || !BUILDERS[kind]) return;
      new Chart(canvas, BUILDERS[kind](spec));
    });
  }

  function failed(event) {
    var target = event.detail && event.detail.elt;
    if (!target || !target.matches("[data-report-loading]")) return;
    var status = target.querySelector("[role=status]");
    var code = event.detail.xhr ? " (" + event.detail.xhr.status + ")" : "";
    status.textContent =
      "The report could not be computed" + code + ". Reload the page to try again.";
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
  });
  document.addEventListener("htmx:responseError", failed);
  document.addEventListener("htmx:sendError", failed);
})();
