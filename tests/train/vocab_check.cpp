// Prints the engine's CLIP tokenizer ids for each line of standard input, one line of
// space-separated BPE ids per input line, so the training code's vocabulary (tools/train/bpe.py)
// can be checked against the tokenizer the engine uses at run time.
//
//   vocab_check CLIP_DIR < captions.txt
#include <cstdio>
#include <iostream>
#include <string>

#include "inference/text/clip_tokenizer.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CLIP_DIR < lines\n", argv[0]);
    return 2;
  }
  auto tokenizer = cubeforge::ClipTokenizer::load(argv[1]);
  if (!tokenizer.ok()) {
    std::fprintf(stderr, "vocab_check: %s\n", tokenizer.error().to_string().c_str());
    return 1;
  }
  std::string line;
  while (std::getline(std::cin, line)) {
    const auto ids = tokenizer->bpe_ids(line);
    for (size_t i = 0; i < ids.size(); ++i) std::printf(i ? " %d" : "%d", ids[i]);
    std::printf("\n");
  }
  return 0;
}
