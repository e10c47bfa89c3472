// Buttons that act (approve, reject, cancel, retry, resume): what the CLI's commands do, asked
// of the dashboard with its token in a header another site's page cannot send.
function act(action, task) {
  var body = { action: action, task: task || null, reason: null };
  if (action === 'reject') {
    body.reason = prompt('Why is ' + task + ' rejected?');
    if (body.reason === null) return;
  }
  var msg = document.getElementById('act-msg');
  if (msg) msg.textContent = action + '…';
  fetch(LIVE.base + '/runs/' + encodeURIComponent(LIVE.run) + '/act', {
    method: 'POST', headers: { 'Content-Type': 'application/json', 'X-Baton-Token': LIVE.act_key },
    body: JSON.stringify(body),
  }).then(function (r) { return r.json(); }).then(function (r) {
    var m = document.getElementById('act-msg');
    if (m) m.textContent = r.message;
    if (typeof refresh === 'function') refresh();
  });
}
document.addEventListener('click', function (e) {
  var b = e.target.closest('[data-act]');
  if (b) { e.preventDefault(); b.disabled = true; act(b.dataset.act, b.dataset.actTask); }
});
