"""Rewrites CUDA kernel launches for the CPU emulator.

`name<template args><<<grid, block[, shared, stream]>>>(arguments);` becomes
`::emulator::launch(grid, block[, shared, stream], [=]() { name<template args>(arguments); });`
so that a .cu file compiles as plain C++ against the emulator's headers.

A kernel declared with `__launch_bounds__(max_threads, ...)` gets
`::emulator::check_launch_bounds(max_threads, "name");` as the first statement
of its body (on the same line, so line numbers stay), since a GPU refuses a
launch with more threads per block than that and the emulator must too.
Usage: transform_launches.py input.cu output.cpp
"""
import re
import sys

LAUNCH = re.compile(r"([A-Za-z_][\w:]*(?:<[^;<>]*(?:<[^;<>]*>[^;<>]*)*>)?)<<<([^;]*?)>>>\(([^;]*?)\);")
BOUNDS = re.compile(r"__launch_bounds__\s*\(")


def balanced_end(text, open_index):
    """Index just past the parenthesis that closes the one at open_index."""
    depth = 0
    for i in range(open_index, len(text)):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                return i + 1
    raise ValueError("unbalanced parentheses")


def first_argument(arguments):
    depth = 0
    for i, c in enumerate(arguments):
        if c in "(<[":
            depth += 1
        elif c in ")>]":
            depth -= 1
        elif c == "," and depth == 0:
            return arguments[:i].strip()
    return arguments.strip()


def check_launch_bounds(text, path):
    """Inserts the launch-bounds check into every kernel that declares bounds."""
    pieces, position, count = [], 0, 0
    for match in BOUNDS.finditer(text):
        if match.start() < position:
            continue
        arguments_end = balanced_end(text, match.end() - 1)
        bound = first_argument(text[match.end():arguments_end - 1])
        name = re.match(r"\s*([A-Za-z_]\w*)\s*\(", text[arguments_end:])
        if not name:
            sys.exit("%s: no kernel name after __launch_bounds__ at offset %d" % (path, match.start()))
        parameters_end = balanced_end(text, arguments_end + name.end() - 1)
        body = text.index("{", parameters_end)
        pieces.append(text[position:body + 1])
        pieces.append(' ::emulator::check_launch_bounds((%s), "%s");' % (bound, name.group(1)))
        position = body + 1
        count += 1
    pieces.append(text[position:])
    return "".join(pieces), count


def main():
    source_path, output_path = sys.argv[1], sys.argv[2]
    with open(source_path, encoding="utf-8") as source:
        text = source.read()
    text, bounded = check_launch_bounds(text, source_path)
    rewritten, count = LAUNCH.subn(
        lambda m: "::emulator::launch(%s, [=]() { %s(%s); });" % (m.group(2), m.group(1), m.group(3)), text)
    if "<<<" in rewritten:
        sys.exit("%s: a kernel launch was not recognised" % source_path)
    with open(output_path, "w", encoding="utf-8") as output:
        output.write('#line 1 "%s"\n' % source_path)
        output.write(rewritten)
    print("%s: %d launches, %d kernels with launch bounds" % (source_path, count, bounded))


if __name__ == "__main__":
    main()
