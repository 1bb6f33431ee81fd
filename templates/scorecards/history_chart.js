// A harness's history: pass rate of each run over time, one line per dataset. Each point
// is a run (labelled by its git_sha when set), its 95 % interval an error bar; a click opens
// it. Chart.js is served from
// this app's static files; without it the tables below say the same.
(function () {
  "use strict";
  var canvas = document.getElementById("history-chart");
  if (!canvas || !window.Chart) return;
  var history = JSON.parse(document.getElementById("history-data").textContent);
  var palette = ["#0969da", "#1a7f37", "#9a6700", "#cf222e", "#8250df", "#bf3989"];
  var datasets = history.series.map(function (series, i) {
    var points = series.points.filter(function (p) { return p.pass_fraction !== null; });
    return {
      label: series.dataset,
      data: points.map(function (p) {
        return { x: Date.parse(p.at), y: p.pass_fraction * 100, point: p };
      }),
      borderColor: palette[i % palette.length],
      backgroundColor: palette[i % palette.length],
      pointStyle: points.map(function (p) { return p.self_hosted ? "rectRot" : "circle"; }),
      pointRadius: 6,
      pointHoverRadius: 8,
      showLine: true,
      tension: 0,
      clip: false,
    };
  });
  // Each point's label (its git SHA, or #run) written above it.
  var pointLabels = {
    id: "pointLabels",
    afterDatasetsDraw: function (chart) {
      var ctx = chart.ctx;
      ctx.save();
      ctx.font = "11px ui-monospace, SFMono-Regular, Menlo, Consolas, monospace";
      ctx.fillStyle = "#59636e";
      ctx.textAlign = "center";
      chart.data.datasets.forEach(function (dataset, i) {
        chart.getDatasetMeta(i).data.forEach(function (element, j) {
          ctx.fillText(dataset.data[j].point.label, element.x, element.y - 10);
        });
      });
      ctx.restore();
    },
  };
  // Each point's 95 % interval, drawn as an error bar under it.
  var errorBars = {
    id: "errorBars",
    beforeDatasetsDraw: function (chart) {
      var ctx = chart.ctx;
      var y = chart.scales.y;
      ctx.save();
      ctx.lineWidth = 1.5;
      chart.data.datasets.forEach(function (dataset, i) {
        ctx.strokeStyle = dataset.borderColor;
        chart.getDatasetMeta(i).data.forEach(function (element, j) {
          var ci = dataset.data[j].point.ci;
          if (!ci) return;
          var top = y.getPixelForValue(ci[1] * 100), bottom = y.getPixelForValue(ci[0] * 100);
          ctx.beginPath();
          ctx.moveTo(element.x, top);
          ctx.lineTo(element.x, bottom);
          ctx.moveTo(element.x - 4, top);
          ctx.lineTo(element.x + 4, top);
          ctx.moveTo(element.x - 4, bottom);
          ctx.lineTo(element.x + 4, bottom);
          ctx.stroke();
        });
      });
      ctx.restore();
    },
  };
  function when(ms) {
    return new Date(ms).toISOString().replace("T", " ").slice(0, 16);
  }
  window.historyChart = new window.Chart(canvas, {
    type: "scatter",
    data: { datasets: datasets },
    plugins: [pointLabels, errorBars],
    options: {
      responsive: true,
      maintainAspectRatio: false,
      animation: false,
      layout: { padding: { top: 18 } },
      interaction: { mode: "nearest", intersect: true },
      scales: {
        x: { type: "linear", ticks: { callback: function (v) { return when(v).slice(5); }, maxTicksLimit: 6 } },
        y: { min: 0, max: 100, title: { display: true, text: "pass rate %" } },
      },
      plugins: {
        tooltip: {
          callbacks: {
            label: function (item) {
              var p = item.raw.point;
              var ci = p.ci ? " [" + Math.round(p.ci[0] * 100) + "\u2013" +
                Math.round(p.ci[1] * 100) + "]" : "";
              return p.label + " · run #" + p.run + " · " + Math.round(p.pass_fraction * 100) +
                "%" + ci + " · " + p.status + (p.self_hosted ? " · self-hosted" : "");
            },
            title: function (items) { return items.length ? when(items[0].raw.x) : ""; },
          },
        },
      },
      onClick: function (event, elements) {
        if (!elements.length) return;
        var element = elements[0];
        var point = datasets[element.datasetIndex].data[element.index].point;
        window.location.href = point.url;
      },
    },
  });
})();
