#!/usr/bin/env python3
"""check_layers.py -- every #include "..." of the tree checked against the build's graph.

    check_layers.py BUILD/layers.txt                  every source of every target, the
                                                      graph's rules, the report's cycles
    check_layers.py BUILD/layers.txt --as TARGET FILE...   FILEs as if TARGET's sources
    check_layers.py LAYERS.txt --graph                the graph's rules alone
    check_layers.py LAYERS.txt --cycles DIR...        include cycles among DIRs' modules

BUILD/layers.txt is written by the configure (cmake/layers.cmake, ddpprof_write_layer_table)
from the targets themselves: each library's include root (ROOT: "common", "report",
"probes/trace_format.h", "train.h"), what each target links (target_link_libraries,
PUBLIC or PRIVATE) and whose headers a module uses without linking (ddpprof_use_headers).
That is the one table: the compiler sees exactly these roots, and this check says which
rule an include breaks, where the compiler would only say "No such file" (or, for an
include that happens to sit beside the file, nothing at all).

A target may include the roots of the libraries it links and of what they link PUBLIC;
a library its own root too.  An include no library's root holds must lie beside the file
("testutil.h", "fuzz_util.h").  Headers are checked as part of the library whose root
holds them.  Exit 0 when every include keeps the rules, 1 otherwise, each violation as

    report/input/import.c:12: includes "train.h" -- rule: report_input may use only
    common, trace_format, run_format (report/CMakeLists.txt:
    target_link_libraries(ddpprof_report_input ...)); "train.h" is trainer's

The graph itself keeps two rules, whatever the CMakeLists.txt files say: no target links
itself through others (a cycle of target_link_libraries), and the report's rooms go one
way (REPORT_ROOMS: output -> analysis -> input, the orchestration above them): a room that
links a room above it, even through another, is one violation naming both.

The modules of the report (a .c and its .h: report/output/charts) include one another
without a cycle: each cycle is one violation naming its modules and the includes that
close it.  (A module that needs what includes it is two modules that are one, or one that
should be two: move what both need below both.)
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
SOURCE_EXT = ('.c', '.h', '.cu', '.cc', '.cpp')


# The report's rooms, lowest first: each may link only the rooms before it
# (report/CMakeLists.txt).
REPORT_ROOMS = ['ddpprof_report_input', 'ddpprof_report_analysis', 'ddpprof_report_output',
                'ddpprof_report']

# Where the modules must not include one another in a cycle.
CYCLE_FREE = ['report']


def read_table(path):
    targets = {}
    with open(path, encoding='utf-8') as f:
        for line in f:
            line = line.rstrip('\n')
            if not line:
                continue
            name, key, value = line.split('\t', 2)
            t = targets.setdefault(name, {'dir': '', 'roots': [], 'links': [], 'interface': [],
                                          'headers': [], 'sources': []})
            t[key] = value if key == 'dir' else [v for v in value.split(';') if v]
    return targets


def display(name):
    return name[len('ddpprof_'):] if name.startswith('ddpprof_') else name


class Graph:
    def __init__(self, targets, source_dir):
        self.t = targets
        self.src = source_dir
        self.owners = {}  # root entry -> libraries whose include root holds it
        for name, t in targets.items():
            for entry in t['roots']:
                self.owners.setdefault(entry, []).append(name)

    def exports(self, lib, seen):
        """lib and what it links PUBLIC (INTERFACE_LINK_LIBRARIES without $<LINK_ONLY:>),
        in the order a reader would name them"""
        out = []
        todo = [lib]
        while todo:
            name = todo.pop(0)
            if name in seen or name not in self.t:
                continue
            seen.add(name)
            out.append(name)
            todo += [n for n in self.t[name]['interface'] if not n.startswith('$<')]
        return out

    def visible(self, target):
        t = self.t[target]
        seen = {target}
        out = [target]
        for lib in t['links'] + t['headers']:
            if lib.startswith('$<LINK_ONLY:'):
                lib = lib[len('$<LINK_ONLY:'):-1]
            out += self.exports(lib, seen)
        return out

    def rule(self, target):
        uses = [display(n) for n in self.visible(target)[1:] if self.t[n]['roots']]
        t = self.t[target]
        where = os.path.join(t['dir'], 'CMakeLists.txt') if t['dir'] else 'CMakeLists.txt'
        how = ('ddpprof_use_headers' if t['headers'] and not t['links'] else
               'target_link_libraries')
        said = f'{where}: {how}({target} ...)'
        if not uses:
            return f'{display(target)} may use no library ({said})'
        return f'{display(target)} may use only {", ".join(uses)} ({said})'

    def owner_of(self, inc):
        """the libraries whose root holds include path inc (the longest entry wins)"""
        best = None
        for entry in self.owners:
            if inc == entry or inc.startswith(entry + '/'):
                if best is None or len(entry) > len(best):
                    best = entry
        return self.owners.get(best, [])

    def check_file(self, target, path, visible):
        problems = []
        try:
            with open(path, encoding='utf-8', errors='replace') as f:
                lines = f.readlines()
        except OSError as e:
            return [f'{path}: cannot read it ({e.strerror})']
        rel = os.path.relpath(path, self.src)
        for number, line in enumerate(lines, 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            inc = m.group(1)
            owners = self.owner_of(inc)
            if owners:
                if any(o in visible for o in owners):
                    continue
                whose = ' or '.join(display(o) for o in owners)
                problems.append(f'{rel}:{number}: includes "{inc}" -- rule: '
                                f'{self.rule(target)}; "{inc}" is {whose}\'s')
            elif os.path.exists(os.path.join(os.path.dirname(path), inc)) and '/' not in inc:
                continue  # a header beside the file, of no library's root
            else:
                problems.append(f'{rel}:{number}: includes "{inc}" -- rule: '
                                f'{self.rule(target)}; no library\'s include root holds '
                                f'"{inc}" (an include is path-qualified from a root: '
                                f'"common/error.h", "comm/store.h")')
        return problems

    def links(self, name):
        """what name links, any scope ($<LINK_ONLY:x> is x)"""
        out = []
        for lib in self.t[name]['links'] + self.t[name]['interface']:
            if lib.startswith('$<LINK_ONLY:'):
                lib = lib[len('$<LINK_ONLY:'):-1]
            if lib in self.t and lib not in out:
                out.append(lib)
        return out

    def where(self, name):
        d = self.t[name]['dir']
        return os.path.join(d, 'CMakeLists.txt') if d else 'CMakeLists.txt'

    def graph_problems(self):
        """a target that links itself through others; a report room that links one above it"""
        problems = []
        state = {}  # name -> 1 on the path, 2 done

        def visit(name, path):
            state[name] = 1
            for nxt in self.links(name):
                if state.get(nxt) == 1:
                    loop = path[path.index(nxt):] + [nxt]
                    problems.append(f'{self.where(name)}: target_link_libraries cycle '
                                    f'{" -> ".join(display(n) for n in loop)} -- rule: no '
                                    f'library links itself')
                elif nxt not in state:
                    visit(nxt, path + [nxt])
            state[name] = 2
        for name in sorted(self.t):
            if name not in state:
                visit(name, [name])
        for i, room in enumerate(REPORT_ROOMS):
            if room not in self.t:
                continue
            seen, todo = set(), list(self.links(room))
            while todo:
                lib = todo.pop()
                if lib in seen:
                    continue
                seen.add(lib)
                todo += self.links(lib)
            for above in REPORT_ROOMS[i + 1:]:
                if above in seen:
                    problems.append(f'{self.where(room)}: {display(room)} links '
                                    f'{display(above)} -- rule: the report\'s rooms go one '
                                    f'way, {" -> ".join(display(r) for r in reversed(REPORT_ROOMS))} '
                                    f'(a room links only the rooms below it)')
        return problems

    def resolve(self, path, inc):
        """the source file an include of path names, or None (a system or unknown one)"""
        beside = os.path.normpath(os.path.join(os.path.dirname(path), inc))
        if '/' not in inc and os.path.exists(beside):
            return beside
        best = None
        for entry in self.owners:
            if (inc == entry or inc.startswith(entry + '/')) and \
                    (best is None or len(entry) > len(best)):
                best = entry
        if best is None:
            return None
        base = best if os.path.exists(os.path.join(self.src, best)) else \
            os.path.join('trainer', best)
        full = os.path.join(self.src, base, inc[len(best) + 1:]) if inc != best else \
            os.path.join(self.src, base)
        return os.path.normpath(full) if os.path.exists(full) else None

    def cycle_problems(self, dirs):
        """include cycles among the modules (a .c and its .h) of the files under dirs"""
        edges = {}  # module -> {module: (file, line, include)}
        for top in dirs:
            for d, _, files in os.walk(top):
                for fn in sorted(files):
                    if not fn.endswith(SOURCE_EXT):
                        continue
                    path = os.path.join(d, fn)
                    mod = os.path.splitext(path)[0]
                    out = edges.setdefault(mod, {})
                    with open(path, encoding='utf-8', errors='replace') as f:
                        for number, line in enumerate(f, 1):
                            m = INCLUDE.match(line)
                            target = self.resolve(path, m.group(1)) if m else None
                            if not target:
                                continue
                            tmod = os.path.splitext(target)[0]
                            if tmod != mod and tmod not in out:
                                out[tmod] = (path, number, m.group(1))
        problems, done = [], set()
        for start in sorted(edges):
            if start in done:
                continue
            loop = self.find_loop(edges, start)
            if not loop:
                continue
            done.update(loop)
            names = [os.path.relpath(m, self.src) for m in loop + [loop[0]]]
            why = '; '.join(f'{os.path.relpath(f, self.src)}:{n} includes "{i}"'
                            for f, n, i in (edges[a][b] for a, b in
                                            zip(loop, loop[1:] + [loop[0]])))
            problems.append(f'{names[0]}: include cycle {" -> ".join(names)} ({why}) -- '
                            f'rule: modules include one another one way')
        return problems

    @staticmethod
    def find_loop(edges, start):
        """the shortest path of modules from start back to start, or None"""
        prev, todo = {start: None}, [start]
        while todo:
            nxt = []
            for m in todo:
                for t in sorted(edges.get(m, {})):
                    if t == start:
                        path = [m]
                        while prev[path[-1]] is not None:
                            path.append(prev[path[-1]])
                        return list(reversed(path))
                    if t not in prev and t in edges:
                        prev[t] = m
                        nxt.append(t)
            todo = nxt
        return None

    def header_files(self):
        """headers under each library's root, with the library they belong to: a file
        entry ("probes/trace_format.h") before the folder that holds it"""
        owned = {}
        for name, t in self.t.items():
            for entry in t['roots']:
                base = entry if os.path.exists(os.path.join(self.src, entry)) else \
                    os.path.join('trainer', entry)
                full = os.path.join(self.src, base)
                if os.path.isfile(full):
                    owned[full] = name
                    continue
                for d, _, files in os.walk(full):
                    for fn in files:
                        if fn.endswith('.h'):
                            owned.setdefault(os.path.join(d, fn), name)
        return owned


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    table = argv[1]
    targets = read_table(table)
    here = os.path.dirname(os.path.abspath(__file__))
    g = Graph(targets, os.path.dirname(here))
    problems = []
    if len(argv) == 3 and argv[2] == '--graph':
        problems = g.graph_problems()
        checked = len(targets)
        for p in problems:
            print(p)
        print(f'check_layers: {checked} targets, {len(problems)} links against the rules')
        return 1 if problems else 0
    if len(argv) > 3 and argv[2] == '--cycles':
        for d in argv[3:]:
            problems += g.cycle_problems([os.path.abspath(d)])
        for p in problems:
            print(p)
        print(f'check_layers: {len(argv) - 3} folders, {len(problems)} include cycles')
        return 1 if problems else 0
    if len(argv) > 3 and argv[2] == '--as':
        target = argv[3]
        if target not in targets:
            print(f'check_layers: no target {target} in {table}', file=sys.stderr)
            return 2
        vis = set(g.visible(target))
        for path in argv[4:]:
            problems += g.check_file(target, os.path.abspath(path), vis)
        checked = len(argv) - 4
    else:
        files = {}
        for name, t in targets.items():
            for s in t['sources']:
                if s.endswith(SOURCE_EXT) and s.startswith(g.src + os.sep) and \
                        os.path.exists(s):
                    files.setdefault(s, []).append(name)
        for h, name in g.header_files().items():
            files.setdefault(h, []).append(name)
        seen = set()
        for path in sorted(files):
            for name in files[path]:
                for p in g.check_file(name, path, set(g.visible(name))):
                    if p not in seen:
                        seen.add(p)
                        problems.append(p)
        checked = len(files)
        problems += g.graph_problems()
        problems += g.cycle_problems([os.path.join(g.src, d) for d in CYCLE_FREE])
    for p in problems:
        print(p)
    print(f'check_layers: {checked} files, {len(problems)} includes against the rules')
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
