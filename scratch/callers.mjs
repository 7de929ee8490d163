import fs from 'node:fs';
const target = process.argv[2] ?? 'writev';
const files = fs.readdirSync('/tmp/prof').filter(f => f.endsWith('.cpuprofile'));
const prof = JSON.parse(fs.readFileSync('/tmp/prof/' + files[0]));
const byId = new Map(prof.nodes.map(n => [n.id, n]));
const parent = new Map();
for (const n of prof.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
const self = new Map();
prof.samples.forEach((id, i) => self.set(id, (self.get(id) ?? 0) + (prof.timeDeltas[i] ?? 0)));
const stacks = new Map();
for (const [id, t] of self) {
  const n = byId.get(id);
  if (n.callFrame.functionName !== target) continue;
  const chain = [];
  let p = parent.get(id);
  while (p && chain.length < 12) { const pn = byId.get(p); chain.push(`${pn.callFrame.functionName || '(anon)'}@${pn.callFrame.url.replace(/.*node_modules\//,'').replace(/.*work\/main\//,'')}:${pn.callFrame.lineNumber}`); p = parent.get(p); }
  const key = chain.slice(0, 8).join(' < ');
  stacks.set(key, (stacks.get(key) ?? 0) + t);
}
for (const [k, t] of [...stacks].sort((a,b)=>b[1]-a[1]).slice(0, 8)) console.log((t/1000).toFixed(0)+'ms', k, '\n');
