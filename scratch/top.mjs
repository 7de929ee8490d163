import fs from 'node:fs';
const file = fs.readdirSync('/tmp/prof')[0];
const prof = JSON.parse(fs.readFileSync('/tmp/prof/' + file));
const self = new Map();
const byId = new Map(prof.nodes.map(n => [n.id, n]));
const dt = prof.timeDeltas; let total = 0;
const counts = new Map();
prof.samples.forEach((id, i) => { counts.set(id, (counts.get(id) ?? 0) + (dt[i] ?? 0)); total += dt[i] ?? 0; });
for (const [id, t] of counts) { const n = byId.get(id); const key = `${n.callFrame.functionName || '(anon)'} ${n.callFrame.url.replace(/.*node_modules\//, '')}:${n.callFrame.lineNumber}`; self.set(key, (self.get(key) ?? 0) + t); }
// aggregate by package
const pkg = new Map();
for (const [id, t] of counts) { const n = byId.get(id); let u = n.callFrame.url; let m = u.match(/node_modules\/((@[^/]+\/)?[^/]+)/); const k = m ? m[1] : (u.includes('/work/main/') ? u.replace(/.*work\/main\//,'') : (u || n.callFrame.functionName)); pkg.set(k, (pkg.get(k) ?? 0) + t); }
console.log('TOTAL ms', (total/1000).toFixed(0));
console.log([...pkg].sort((a,b)=>b[1]-a[1]).slice(0,25).map(([k,t])=>`${(t/total*100).toFixed(1)}% ${k}`).join('\n'));
console.log('---');
console.log([...self].sort((a,b)=>b[1]-a[1]).slice(0,25).map(([k,t])=>`${(t/total*100).toFixed(1)}% ${k}`).join('\n'));
