#!/usr/bin/env python3
"""Pairs of source files that import each other, per crate.

An import is any `crate::`, `super::`, `self::` path (grouped imports
expanded) or a path through a child module the file declares (`mod x;`
then `x::...`), resolved to the file of the module it names. A name that a
module only re-exports (`pub use a::b::Name`) resolves to the file that
owns it, so importing through a crate's door is not importing the door.
Unit-test modules (`tests.rs`, `tests/`, `#[cfg(test)] mod tests {..}`)
are left out: a test imports what it tests by design."""
import os, re, subprocess, sys
root = sys.argv[1] if len(sys.argv) > 1 else '.'
files = subprocess.run(['git', 'ls-files', '-co', '--exclude-standard', '*.rs'], cwd=root,
                       capture_output=True, text=True).stdout.split()
files = [f for f in files if os.path.exists(os.path.join(root, f))]
def crate_of(f):
    parts = f.split('/')
    if 'src' not in parts: return None
    i = parts.index('src')
    return '/'.join(parts[:i + 1])
def modpath(f, src):
    rel = f[len(src) + 1:-3].split('/')
    if rel[-1] in ('lib', 'main', 'mod'): rel = rel[:-1]
    return rel
def clean(text):
    text = re.sub(r'//[^\n]*', '', text)
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', text)
    return re.sub(r'#\[cfg\(test\)\]\s*mod tests\s*\{.*', '', text, flags=re.S)
def expand_groups(text):
    def expand(m):
        pre = m.group(1)
        items = [i.strip() for i in re.split(r',(?![^{]*\})', m.group(2)) if i.strip()]
        return ' '.join(pre + '::' + i for i in items)
    for _ in range(4):
        text = re.sub(r'\b((?:crate|super|self|\w+)(?:::\w+)*)::\{([^{}]*)\}', expand, text)
    return text
index, texts, reexports = {}, {}, {}
for f in files:
    src = crate_of(f)
    if not src: continue
    index[(src, tuple(modpath(f, src)))] = f
    texts[f] = expand_groups(clean(open(os.path.join(root, f), errors='replace').read()))
def absolute(src, me, path):
    """A path as written in module `me` -> absolute module path (or None)."""
    head, rest = path[0], path[1:]
    if head == 'crate': return rest
    if head == 'self': return list(me) + rest
    if head == 'super':
        base = list(me[:-1])
        while rest and rest[0] == 'super':
            base, rest = base[:-1], rest[1:]
        return base + rest
    return None
for f, text in texts.items():
    src = crate_of(f); me = modpath(f, src)
    for m in re.finditer(r'\bpub(?:\([^)]*\))?\s+use\s+([^;]+);', text):
        for item in re.split(r'\s+(?!as\b)(?<!\bas\s)', m.group(1).strip()):
            mm = re.match(r'([\w:]+?)(?:\s+as\s+(\w+))?$', item.strip())
            if not mm: continue
            segs = mm.group(1).split('::')
            name = mm.group(2) or segs[-1]
            target = absolute(src, me, segs)
            if target is None:
                target = list(me) + segs  # a child module's item
            reexports.setdefault(f, {})[name] = target
def resolve(src, path, depth=0):
    for n in range(len(path), -1, -1):
        f = index.get((src, tuple(path[:n])))
        if f:
            rest = path[n:]
            if rest and depth < 8 and rest[0] in reexports.get(f, {}):
                g = resolve(src, reexports[f][rest[0]] + rest[1:], depth + 1)
                if g: return g
            return f
    return None
edges, why = {}, {}
# `#[macro_export]` macros live at the crate root whatever file defines them.
for f, text in texts.items():
    for name in re.findall(r'#\[macro_export\]\s*macro_rules!\s*(\w+)', text):
        reexports.setdefault(index[(crate_of(f), ())], {})[name] = modpath(f, crate_of(f)) + ["__macro"]
for f, text in texts.items():
    src = crate_of(f)
    if '/tests/' in f[len(src):] or f.endswith('/tests.rs'): continue
    me = modpath(f, src)
    children = set(re.findall(r'^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;', text, flags=re.M)) - {'tests'}
    body = re.sub(r'^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+\w+\s*;', '', text, flags=re.M)
    # A re-export is the door, not a use of what it names.
    body = re.sub(r'\bpub(?:\([^)]*\))?\s+use\s+[^;]+;', '', body)
    for m in re.finditer(r'(?<![:\w])(\w+)((?:::\w+)+)', body):
        segs = [m.group(1)] + m.group(2).split('::')[1:]
        if segs[0] in children: target = list(me) + segs
        else: target = absolute(src, me, segs)
        if target is None: continue
        t = resolve(src, target)
        if t and t != f and not (t.endswith('/tests.rs') or '/tests/' in t[len(src):]):
            edges.setdefault(f, set()).add(t)
            why.setdefault((f, t), set()).add('::'.join(segs))
pairs = sorted({tuple(sorted((a, b))) for a, bs in edges.items() for b in bs if a in edges.get(b, ())})
for a, b in pairs:
    print(f"{a} <-> {b}")
    if '--why' in sys.argv:
        print("    ", sorted(why[(a, b)])[:4], sorted(why[(b, a)])[:4])
print(f"{len(pairs)} pairs", file=sys.stderr)
