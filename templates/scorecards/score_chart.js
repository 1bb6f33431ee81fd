// The run page's score distribution: how many cases fall in each tenth of pass fraction.
// Chart.js is served from this app's static files; without it the list under the chart
// says the same in words.
(function () {
  "use strict";
  var canvas = document.getElementById("score-chart");
  if (!canvas || !window.Chart) return;
  var bins = JSON.parse(document.getElementById("score-distribution").textContent);
  var labels = bins.map(function (_, i) { return (i * 10) + "–" + (i * 10 + 10) + "%"; });
  var colours = bins.map(function (_, i) {
    return i === bins.length - 1 ? "#1a7f37" : i === 0 ? "#cf222e" : "#9a6700";
  });
  window.scoreChart = new window.Chart(canvas, {
    type: "bar",
    data: { labels: labels, datasets: [{ label: "cases", data: bins, backgroundColor: colours }] },
    options: {
      responsive: true,
      maintainAspectRatio: false,
      animation: false,
      plugins: { legend: { display: false } },
      scales: {
        x: { title: { display: true, text: "pass fraction" } },
        y: { beginAtZero: true, ticks: { precision: 0 }, title: { display: true, text: "cases" } },
      },
    },
  });
})();
