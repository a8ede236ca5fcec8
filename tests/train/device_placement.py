"""Training recipe (tools/train/): every network's forward and backward pass keeps to the device
of its inputs and parameters. Run on PyTorch's meta device, where an op that mixes a meta tensor
with one made on the CPU fails, so a table, mask or padding built on the CPU inside models.py is
caught without a GPU. (The training loops themselves are checked on a GPU by
resume_test.sh REPO_ROOT cuda.)

    tests/train/python_test.sh REPO_ROOT tests/train/device_placement.py
"""

import os
import sys

import torch

sys.path.insert(0, os.path.join(sys.argv[1], "tools", "train"))
import bpe  # noqa: E402
import diffusion  # noqa: E402
import train  # noqa: E402

META = torch.device("meta")


def main():
    p = train.PRESETS["smoke"]
    ae = train.models.ShapeAutoEncoder(p["ae"]).to(META)
    points, normals, queries = (torch.zeros(2, n, 3, device=META) for n in (64, 64, 32))
    for quantise in (False, True):
        logits, aux = ae(points, normals, queries, quantise)
        loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, torch.zeros(2, 32, device=META))
        if quantise:
            loss = loss + aux["codebook_loss"] + 0.25 * aux["commit_loss"]
        loss.backward()
    print("autoencoder: forward and backward on the meta device, quantised and not")

    texts = ["a tall chair", "a round table with three legs", ""]
    tokenizer = bpe.Tokenizer(*bpe.train(texts * 4))
    gpt, clip = train.build_gpt_and_clip(p, tokenizer)
    gpt.to(META)
    clip.to(META)
    ids, masks = zip(*[tokenizer.encode(t) for t in texts])
    length = p["ae"]["num_encoder_latents"]
    inputs = torch.zeros(len(texts), length, dtype=torch.long, device=META)

    def condition():
        return gpt.condition(clip(torch.tensor(ids, device=META), torch.tensor(masks, device=META)),
                             torch.zeros(len(texts), 3, device=META))

    table = gpt.token_table(ae.vq.get_codebook())
    gpt(table[inputs], condition()).sum().backward()
    print("gpt + clip: forward and backward on the meta device")

    table = gpt.token_table(ae.vq.get_codebook().detach())
    positions = torch.cat([torch.arange(length), torch.arange(length)])
    visible = diffusion.two_copy_visibility(length, 4)
    gpt.forward_visible(table[torch.cat([inputs, inputs], dim=1)], condition(), positions, visible).sum().backward()
    print("gpt forward_visible (block diffusion): forward and backward on the meta device")


if __name__ == "__main__":
    main()
