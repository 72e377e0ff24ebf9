// The radkit console's script: live updates over SSE and the actions (answer, approve, reject,
// cancel, sign out). No framework; each page works without it except for these.

const csrf = () => document.querySelector('meta[name="radkit-csrf"]')?.content ?? '';

async function post(url, body) {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', 'X-Radkit-Csrf': csrf() },
    body: body === undefined ? undefined : JSON.stringify(body),
    credentials: 'same-origin',
  });
  let answer = {};
  try { answer = await response.json(); } catch { /* 204 */ }
  if (!response.ok) throw new Error(answer.error ?? `${response.status} ${response.statusText}`);
  return answer;
}

function say(section, text, error) {
  const out = section.querySelector('.result');
  if (!out) return;
  out.textContent = text;
  out.className = error ? 'result error' : 'result';
}

// The task list: rows replaced or added as the stream sends them.
function followList(table) {
  const rows = table.querySelector('#rows');
  const firstPage = table.dataset.live === 'first';
  const source = new EventSource(`/console/events${table.dataset.query || ''}`);
  const template = document.createElement('template');
  source.addEventListener('row', (e) => {
    const { id, html } = JSON.parse(e.data);
    template.innerHTML = html.trim();
    const row = template.content.firstElementChild;
    row.classList.add('fresh');
    const old = document.getElementById(`task-${id}`);
    if (old) old.replaceWith(row);
    else if (firstPage) {
      rows.prepend(row);
      document.querySelector('p.empty')?.remove();
    }
  });
  source.addEventListener('gone', (e) => {
    const { id } = JSON.parse(e.data);
    document.getElementById(`task-${id}`)?.remove();
  });
  source.addEventListener('counts', (e) => {
    const { html } = JSON.parse(e.data);
    template.innerHTML = html.trim();
    document.getElementById('counts')?.replaceWith(template.content.firstElementChild);
  });
  source.addEventListener('reload', () => { if (firstPage) location.reload(); });
}

// A task's page: its part fetched again each time its journal grows; what is typed is kept.
function followTask(task) {
  const id = task.dataset.task;
  let fetching = null;
  let again = false;
  const refresh = async () => {
    if (fetching) { again = true; return; }
    fetching = (async () => {
      const response = await fetch(`/console/tasks/${encodeURIComponent(id)}/fragment`, { credentials: 'same-origin' });
      if (!response.ok) return;
      const html = await response.text();
      const typed = {};
      task.querySelectorAll('#act textarea, #act input[type=text]').forEach((field) => { typed[field.name] = field.value; });
      const focused = document.activeElement?.name;
      task.innerHTML = html;
      task.querySelectorAll('#act textarea, #act input[type=text]').forEach((field) => {
        if (typed[field.name]) field.value = typed[field.name];
        if (field.name === focused) field.focus();
      });
    })();
    try { await fetching; } finally {
      fetching = null;
      if (again) { again = false; refresh(); }
    }
  };
  const source = new EventSource(`/console/tasks/${encodeURIComponent(id)}/events`);
  let seen = Number(task.querySelector('#timeline')?.dataset.lastSeq ?? 0);
  source.addEventListener('changed', (e) => {
    const { seq } = JSON.parse(e.data);
    if (seq !== seen) { seen = seq; refresh(); }
  });
}

// Actions, delegated: the forms of a task page are replaced as it changes.
document.addEventListener('submit', async (e) => {
  const form = e.target;
  const action = form.dataset?.action;
  if (!action) return;
  e.preventDefault();
  const section = form.closest('#act');
  const id = section?.dataset.task;
  if (!id) return;
  const base = `/console/tasks/${encodeURIComponent(id)}`;
  try {
    let answer;
    if (action === 'answer') {
      answer = await post(`${base}/answer`, { text: form.elements.text.value });
      form.elements.text.value = '';
    } else if (action === 'decide') {
      const decision = e.submitter?.value ?? 'approve';
      answer = await post(`${base}/decide`, { decision, note: form.elements.note.value });
    } else if (action === 'cancel') {
      if (!confirm('Cancel this task? Its compensations run, newest first.')) return;
      answer = await post(`${base}/cancel`);
    }
    say(section, `Sent. The task is ${answer.state}.`, false);
  } catch (error) {
    say(section, error.message, true);
  }
});

document.addEventListener('click', async (e) => {
  if (e.target?.dataset?.action !== 'logout') return;
  try { await post('/console/logout'); } finally { location.assign('/console/login'); }
});

// The skills page: Mermaid (embedded, loaded on this page only) draws each step graph.
export async function drawGraphs(src) {
  await new Promise((resolve, reject) => {
    const script = document.createElement('script');
    script.src = src;
    script.onload = resolve;
    script.onerror = reject;
    document.head.append(script);
  });
  window.mermaid.initialize({ startOnLoad: false, securityLevel: 'strict', theme: 'neutral' });
  await window.mermaid.run({ querySelector: 'pre.mermaid' });
  document.body.dataset.graphs = 'drawn';
}

const table = document.querySelector('table.tasks');
if (table) followList(table);
const task = document.getElementById('task');
if (task) followTask(task);
