#!/usr/bin/env python3
"""check_function_length.py -- no C function longer than a page or two.

    check_function_length.py [--max N] PATH...

Every function defined in the .c files under each PATH (a folder, walked, or one file) is
measured from the first line of its definition (its return type) to its closing brace; one
longer than N lines (default 120) is one line

    report/analysis/predict.c:245: source_calibrate is 206 lines (at most 120): split it
    into named helpers

and the exit status is 1.  Comments, strings, character constants and preprocessor lines
are skipped when the braces are counted; a function is a brace block at file scope after a
parameter list (`) {`, attributes between them too), so initialisers (`= {`) and struct,
union and enum bodies are not functions.  ctest runs it on report/ (test_function_length).
"""
import os
import re
import sys

IDENT = re.compile(r'[A-Za-z_][A-Za-z_0-9]*')


def strip(text):
    """text with comments, strings, character constants and preprocessor lines blanked
    (newlines kept, so offsets and line numbers stay)"""
    out = list(text)
    i, n = 0, len(text)
    line_start = True
    while i < n:
        c = text[i]
        if line_start and c in ' \t':
            i += 1
            continue
        if line_start and c == '#':  # a directive, with its continuation lines
            while i < n and text[i] != '\n':
                if text[i] == '\\' and i + 1 < n and text[i + 1] == '\n':
                    out[i] = ' '
                    i += 2
                    continue
                out[i] = ' '
                i += 1
            continue
        line_start = c == '\n'
        if text.startswith('//', i):
            while i < n and text[i] != '\n':
                out[i] = ' '
                i += 1
        elif text.startswith('/*', i):
            end = text.find('*/', i + 2)
            end = n if end < 0 else end + 2
            for k in range(i, end):
                if text[k] != '\n':
                    out[k] = ' '
            i = end
        elif c in '"\'':
            k = i + 1
            while k < n and text[k] != c:
                k += 2 if text[k] == '\\' else 1
            for j in range(i, min(k + 1, n)):
                if text[j] != '\n':
                    out[j] = ' '
            i = k + 1
        else:
            i += 1
    return ''.join(out)


def functions(text):
    """(name, first line, last line) of every function defined in text"""
    s = strip(text)
    line_of = [0] * (len(s) + 1)
    ln = 1
    for i, c in enumerate(s):
        line_of[i] = ln
        if c == '\n':
            ln += 1
    line_of[len(s)] = ln
    found = []
    depth, stmt = 0, 0  # stmt: where the current file-scope declaration begins
    i = 0
    while i < len(s):
        c = s[i]
        if depth == 0 and c in ';}':
            stmt = i + 1
        elif c == '{':
            if depth == 0:
                head = s[stmt:i]
                body_end = match_brace(s, i)
                if is_function(head):
                    start = stmt + len(head) - len(head.lstrip())
                    found.append((function_name(head), line_of[start], line_of[body_end]))
                    i = body_end + 1
                    stmt = i
                    continue
            depth += 1
        elif c == '}':
            depth -= 1
        i += 1
    return found


def match_brace(s, i):
    depth = 0
    for k in range(i, len(s)):
        if s[k] == '{':
            depth += 1
        elif s[k] == '}':
            depth -= 1
            if depth == 0:
                return k
    return len(s) - 1


def is_function(head):
    """a declarator with a parameter list, then at most attributes, before the brace"""
    h = head.strip()
    if not h.endswith(')') or '=' in h.split('(')[0]:
        return False
    first = IDENT.match(h)
    return not (first and first.group(0) in ('struct', 'union', 'enum') and '(' not in h)


def function_name(head):
    """the identifier before the first parenthesis at the declarator's top level"""
    depth = 0
    for k, c in enumerate(head):
        if c == '(':
            if depth == 0:
                names = IDENT.findall(head[:k])
                if names:
                    return names[-1]
            depth += 1
        elif c == ')':
            depth -= 1
    return '?'


def c_files(path):
    if os.path.isfile(path):
        yield path
        return
    for d, _, files in os.walk(path):
        for fn in sorted(files):
            if fn.endswith('.c'):
                yield os.path.join(d, fn)


def main(argv):
    limit = 120
    args = argv[1:]
    if len(args) >= 2 and args[0] == '--max':
        limit = int(args[1])
        args = args[2:]
    if not args:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(here)
    problems, count = [], 0
    for path in args:
        for f in c_files(path):
            with open(f, encoding='utf-8', errors='replace') as fh:
                text = fh.read()
            rel = os.path.relpath(os.path.abspath(f), root)
            for name, first, last in functions(text):
                count += 1
                n = last - first + 1
                if n > limit:
                    problems.append(f'{rel}:{first}: {name} is {n} lines (at most {limit}): '
                                    f'split it into named helpers')
    for p in problems:
        print(p)
    print(f'check_function_length: {count} functions, {len(problems)} longer than {limit} lines')
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
