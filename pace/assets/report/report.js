
let onlyQuery = null;   // one query's id (from the link), or null: all
function applyFilters(){
  const ms = new Set([...document.querySelectorAll('input[name=method]:checked')].map(e => e.value));
  const v = id => document.getElementById(id).value;
  const lab = v('f-label'), typ = v('f-type'), ver = v('f-verdict');
  let n = 0;
  document.querySelectorAll('section.query').forEach(s => {
    let any = false;
    s.querySelectorAll('.card').forEach(c => {
      const ok = ms.has(c.dataset.method) && (ver === 'all' || c.dataset.verdict === ver);
      c.hidden = !ok; any = any || ok;
    });
    const ok = any && (lab === 'all' || s.dataset.label === lab) && (typ === 'all' || s.dataset.type === typ)
      && (!onlyQuery || s.id === 'q-' + onlyQuery);
    s.hidden = !ok; if (ok) n++;
  });
  document.getElementById('shown').textContent = n + ' of ' +
    document.querySelectorAll('section.query').length + ' queries shown';
}
// a link to one view: #method=bm25,dense&label=conflict&type=state&verdict=PASS&query=ID
function fromHash(){
  const h = new URLSearchParams(location.hash.slice(1));
  if (h.has('method')) { const ms = h.get('method').split(',');
    document.querySelectorAll('input[name=method]').forEach(e => { e.checked = ms.includes(e.value); }); }
  for (const k of ['label', 'type', 'verdict'])
    if (h.has(k)) document.getElementById('f-' + k).value = h.get(k);
  onlyQuery = h.get('query');
  applyFilters();
}
document.getElementById('filters').addEventListener('change', applyFilters);
fromHash();
