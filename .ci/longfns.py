#!/usr/bin/env python3
"""Functions longer than N lines (from the `fn` line to its closing brace)."""
import re, sys, subprocess, os
N = int(sys.argv[1]) if len(sys.argv) > 1 else 80
root = sys.argv[2] if len(sys.argv) > 2 else '.'
files = subprocess.run(['git', 'ls-files', '-co', '--exclude-standard', '*.rs'], cwd=root, capture_output=True, text=True).stdout.split()
fnre = re.compile(r'^\s*(pub(\([^)]*\))?\s+)?(async\s+)?(const\s+)?(unsafe\s+)?fn\s+(\w+)')
out = []
for f in files:
    p = os.path.join(root, f)
    if not os.path.exists(p): continue
    lines = open(p, errors='replace').read().split('\n')
    i = 0
    while i < len(lines):
        m = fnre.match(lines[i])
        if m:
            depth = 0; started = False; j = i
            while j < len(lines):
                code = re.sub(r'//.*', '', lines[j])
                code = re.sub(r'"([^"\\]|\\.)*"', '""', code)
                code = re.sub(r"'([^'\\]|\\.)'", "''", code)
                for ch in code:
                    if ch == '{': depth += 1; started = True
                    elif ch == '}': depth -= 1
                if started and depth <= 0: break
                if not started and code.rstrip().endswith(';'): break
                j += 1
            n = j - i + 1
            if started and n > N:
                out.append((n, f, i + 1, m.group(6)))
        i += 1
for n, f, l, name in sorted(out, reverse=True):
    print(f"{n:4d} {f}:{l} {name}")
