import fs from 'node:fs';
const files = fs.readdirSync('/tmp/prof').filter(f => f.endsWith('.cpuprofile'));
const prof = JSON.parse(fs.readFileSync('/tmp/prof/' + files[0]));
const byId = new Map(prof.nodes.map(n => [n.id, n]));
const self = new Map();
prof.samples.forEach((id, i) => self.set(id, (self.get(id) ?? 0) + (prof.timeDeltas[i] ?? 0)));
const total = [...self.values()].reduce((a,b)=>a+b,0);
// inclusive time per function name+url
const incl = new Map();
function walk(id, stack) {
  const n = byId.get(id);
  const key = `${n.callFrame.functionName || '(anon)'} ${n.callFrame.url.replace(/.*node_modules\//,'').replace(/.*work\/main\//,'')}:${n.callFrame.lineNumber}`;
  const fresh = !stack.has(key);
  let t = self.get(id) ?? 0;
  const next = fresh ? new Set(stack).add(key) : stack;
  for (const c of n.children ?? []) t += walk(c, next);
  if (fresh) incl.set(key, (incl.get(key) ?? 0) + t);
  return t;
}
walk(prof.nodes[0].id, new Set());
const pattern = new RegExp(process.argv[2] ?? '.');
console.log([...incl].filter(([k]) => pattern.test(k)).sort((a,b)=>b[1]-a[1]).slice(0, 45).map(([k,t])=>`${(t/total*100).toFixed(1)}% ${k}`).join('\n'));
