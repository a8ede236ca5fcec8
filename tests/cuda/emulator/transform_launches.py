"""Rewrites CUDA kernel launches for the CPU emulator.

`name<template args><<<grid, block[, shared, stream]>>>(arguments);` becomes
`::emulator::launch(grid, block[, shared, stream], [=]() { name<template args>(arguments); });`
so that a .cu file compiles as plain C++ against the emulator's headers.
Usage: transform_launches.py input.cu output.cpp
"""
import re
import sys

LAUNCH = re.compile(r"([A-Za-z_][\w:]*(?:<[^;<>]*(?:<[^;<>]*>[^;<>]*)*>)?)<<<([^;]*?)>>>\(([^;]*?)\);")


def main():
    source_path, output_path = sys.argv[1], sys.argv[2]
    with open(source_path, encoding="utf-8") as source:
        text = source.read()
    rewritten, count = LAUNCH.subn(
        lambda m: "::emulator::launch(%s, [=]() { %s(%s); });" % (m.group(2), m.group(1), m.group(3)), text)
    if "<<<" in rewritten:
        sys.exit("%s: a kernel launch was not recognised" % source_path)
    with open(output_path, "w", encoding="utf-8") as output:
        output.write('#line 1 "%s"\n' % source_path)
        output.write(rewritten)
    print("%s: %d launches" % (source_path, count))


if __name__ == "__main__":
    main()
