"""PyTorch modules of the Cube 3D architecture, written for training small models on the CPU.

Three networks, with parameter names equal to the tensor names the engine reads
(inference/model/config.cpp lists them; a state_dict exports as is):
  - ClipText: Hugging Face's CLIPTextModel (keys "text_model.*"), returning
    last_hidden_state for all 77 positions;
  - ShapeAutoEncoder: the OneDAutoEncoder (phase-modulated Fourier embedding, cross/self
    attention encoder, spherical VQ bottleneck, self-attention decoder, occupancy decoder);
  - DualStreamGPT: the DualStreamRoformer (dual-stream blocks over [cond ; shape], the last one
    cond_pre_only, then single-stream blocks; interleaved RoPE; SwiGLU).
Semantics follow the project's "Model facts" (docs/design.md). For speed on two cores: masks and
rotary tables are built once per sequence length and cached, RoPE is real-valued (cos/sin
with a pair swap, no complex numbers), attention is plain matmul + softmax (torch 1.13 has no
fused kernel on the CPU anyway).
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

# --------------------------------------------------------------------------------------
# Shared pieces


def layer_norm(x, eps):
    """LayerNorm without affine parameters (the reference's ln_1/ln_2/ln_3/ln_f)."""
    return F.layer_norm(x, x.shape[-1:], eps=eps)


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-5, trainable=True):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim), requires_grad=trainable)

    def forward(self, x):
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + self.eps) * self.weight


def attention(q, k, v, bias=None):
    """q [B,H,Tq,D], k/v [B,H,Tk,D]; bias broadcastable to [B,H,Tq,Tk] (0 or -inf)."""
    scores = torch.matmul(q, k.transpose(-1, -2)) * (q.shape[-1] ** -0.5)
    if bias is not None:
        scores = scores + bias
    return torch.matmul(torch.softmax(scores, dim=-1), v)


def split_heads(x, heads):
    b, t, d = x.shape
    return x.view(b, t, heads, d // heads).transpose(1, 2)


def merge_heads(x):
    b, h, t, d = x.shape
    return x.transpose(1, 2).reshape(b, t, h * d)


# --------------------------------------------------------------------------------------
# CLIP text encoder (Hugging Face CLIPTextModel layout)


class ClipAttention(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.q_proj = nn.Linear(width, width)
        self.k_proj = nn.Linear(width, width)
        self.v_proj = nn.Linear(width, width)
        self.out_proj = nn.Linear(width, width)

    def forward(self, x, bias):
        q, k, v = (split_heads(p(x), self.heads) for p in (self.q_proj, self.k_proj, self.v_proj))
        return self.out_proj(merge_heads(attention(q, k, v, bias)))


class ClipMLP(nn.Module):
    def __init__(self, width, hidden):
        super().__init__()
        self.fc1 = nn.Linear(width, hidden)
        self.fc2 = nn.Linear(hidden, width)

    def forward(self, x):
        h = self.fc1(x)
        return self.fc2(h * torch.sigmoid(1.702 * h))  # quick_gelu, CLIP's activation


class ClipLayer(nn.Module):
    def __init__(self, width, heads, hidden, eps):
        super().__init__()
        self.self_attn = ClipAttention(width, heads)
        self.layer_norm1 = nn.LayerNorm(width, eps=eps)
        self.mlp = ClipMLP(width, hidden)
        self.layer_norm2 = nn.LayerNorm(width, eps=eps)

    def forward(self, x, bias):
        x = x + self.self_attn(self.layer_norm1(x), bias)
        return x + self.mlp(self.layer_norm2(x))


class _ClipEmbeddings(nn.Module):
    def __init__(self, vocab, width, positions):
        super().__init__()
        self.token_embedding = nn.Embedding(vocab, width)
        self.position_embedding = nn.Embedding(positions, width)
        nn.init.normal_(self.token_embedding.weight, std=0.02)
        nn.init.normal_(self.position_embedding.weight, std=0.01)


class _ClipEncoder(nn.Module):
    def __init__(self, layers, width, heads, hidden, eps):
        super().__init__()
        self.layers = nn.ModuleList([ClipLayer(width, heads, hidden, eps) for _ in range(layers)])


class _ClipTextModel(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.embeddings = _ClipEmbeddings(cfg["vocab_size"], cfg["hidden_size"], cfg["max_position_embeddings"])
        self.encoder = _ClipEncoder(cfg["num_hidden_layers"], cfg["hidden_size"], cfg["num_attention_heads"],
                                    cfg["intermediate_size"], cfg["layer_norm_eps"])
        self.final_layer_norm = nn.LayerNorm(cfg["hidden_size"], eps=cfg["layer_norm_eps"])


class ClipText(nn.Module):
    """last_hidden_state = final_layer_norm(layers(token + position)), causal attention that
    also ignores padding keys (Hugging Face's combined mask)."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = dict(cfg)
        self.text_model = _ClipTextModel(cfg)
        t = cfg["max_position_embeddings"]
        self.register_buffer("causal", torch.triu(torch.full((t, t), float("-inf")), 1), persistent=False)

    def forward(self, ids, mask):
        """ids, mask: [B, 77] int64 -> [B, 77, C]."""
        m = self.text_model
        t = ids.shape[1]
        x = m.embeddings.token_embedding(ids) + m.embeddings.position_embedding.weight[:t]
        pad = torch.zeros(mask.shape, dtype=x.dtype, device=x.device).masked_fill(mask == 0, float("-inf"))
        bias = self.causal[:t, :t][None, None] + pad[:, None, None, :]
        for layer in m.encoder.layers:
            x = layer(x, bias)
        return m.final_layer_norm(x)


def clip_config(width, layers, heads, vocab_size, start_id, end_id):
    return {
        "vocab_size": vocab_size, "hidden_size": width, "intermediate_size": 4 * width,
        "num_attention_heads": heads, "num_hidden_layers": layers, "max_position_embeddings": 77,
        "layer_norm_eps": 1e-5, "hidden_act": "quick_gelu", "bos_token_id": start_id,
        "eos_token_id": end_id, "pad_token_id": end_id, "projection_dim": width,
    }


# --------------------------------------------------------------------------------------
# Shape tokenizer (OneDAutoEncoder)


class FourierEmbedder(nn.Module):
    def __init__(self, num_freqs):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(3, num_freqs) * math.sqrt(0.5 * num_freqs))
        f = torch.arange(num_freqs, dtype=torch.float32) / max(num_freqs - 1, 1)
        carrier = ((num_freqs / 8) ** (1 - f) + f) * 2 * math.pi
        self.register_buffer("carrier", carrier, persistent=False)
        self.out_dim = 3 * (2 * num_freqs + 1)

    def forward(self, p):
        m = p.unsqueeze(-1)
        fm = (m * self.weight).flatten(-2)
        pm = (m * (0.5 * math.pi) + self.carrier).flatten(-2)
        return torch.cat([p, fm.cos() + pm.cos(), fm.sin() + pm.sin()], dim=-1)


class MLPEmbedder(nn.Module):
    def __init__(self, in_dim, width):
        super().__init__()
        self.in_layer = nn.Linear(in_dim, width)
        self.out_layer = nn.Linear(width, width)

    def forward(self, x):
        return self.out_layer(F.silu(self.in_layer(x)))


class GeluMLP(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.up_proj = nn.Linear(width, 4 * width)
        self.down_proj = nn.Linear(4 * width, width)

    def forward(self, x):
        return self.down_proj(F.gelu(self.up_proj(x)))


class SelfAttention(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.c_qk = nn.Linear(width, 2 * width)
        self.c_v = nn.Linear(width, width)
        self.c_proj = nn.Linear(width, width)
        self.q_norm = RMSNorm(width // heads)
        self.k_norm = RMSNorm(width // heads)

    def forward(self, x):
        q, k = self.c_qk(x).chunk(2, dim=-1)
        q = self.q_norm(split_heads(q, self.heads))
        k = self.k_norm(split_heads(k, self.heads))
        v = split_heads(self.c_v(x), self.heads)
        return self.c_proj(merge_heads(attention(q, k, v)))


class CrossAttention(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.c_q = nn.Linear(width, width)
        self.c_k = nn.Linear(width, width)
        self.c_v = nn.Linear(width, width)
        self.c_proj = nn.Linear(width, width)

    def forward(self, x, c):
        q = split_heads(self.c_q(x), self.heads)
        k = split_heads(self.c_k(c), self.heads)
        v = split_heads(self.c_v(c), self.heads)
        return self.c_proj(merge_heads(attention(q, k, v)))


class SelfLayer(nn.Module):
    def __init__(self, width, heads, eps):
        super().__init__()
        self.eps = eps
        self.attn = SelfAttention(width, heads)
        self.mlp = GeluMLP(width)

    def forward(self, x):
        x = x + self.attn(layer_norm(x, self.eps))
        return x + self.mlp(layer_norm(x, self.eps))


class CrossLayer(nn.Module):
    def __init__(self, width, heads, eps):
        super().__init__()
        self.eps = eps
        self.attn = CrossAttention(width, heads)
        self.mlp = GeluMLP(width)

    def forward(self, x, c):
        x = x + self.attn(layer_norm(x, self.eps), layer_norm(c, self.eps))
        return x + self.mlp(layer_norm(x, self.eps))


def _sorted_by_distance_to_first(x):
    order = torch.argsort(torch.cdist(x, x[:1]).squeeze(1))
    return x[order]


class ShapeEncoder(nn.Module):
    def __init__(self, cfg, embedder):
        super().__init__()
        w = cfg["width"]
        self.embedder = embedder
        query = torch.empty(cfg["num_encoder_latents"] + 1, w).uniform_(-1, 1)
        self.query = nn.Parameter(_sorted_by_distance_to_first(query))
        self.feat_in = MLPEmbedder(embedder.out_dim + cfg["point_feats"], w)
        levels = set(cfg["encoder_cross_attention_levels"])
        self.blocks = nn.ModuleList([CrossLayer(w, cfg["num_heads"], cfg["eps"]) if i in levels
                                     else SelfLayer(w, cfg["num_heads"], cfg["eps"])
                                     for i in range(cfg["num_encoder_layers"])])
        self.ln_f = nn.LayerNorm(w, eps=cfg["eps"])

    def forward(self, points, normals):
        data = self.feat_in(torch.cat([self.embedder(points), normals], dim=-1))
        h = self.query.unsqueeze(0).expand(points.shape[0], -1, -1)
        for block in self.blocks:
            h = block(h, data) if isinstance(block, CrossLayer) else block(h)
        return self.ln_f(h)[:, 1:]  # drop the cls token


class SphericalVQ(nn.Module):
    def __init__(self, width, embed_dim, codes):
        super().__init__()
        self.codebook = nn.Embedding(codes, embed_dim)
        nn.init.uniform_(self.codebook.weight, -1.0 / codes, 1.0 / codes)
        self.c_in = nn.Linear(width, embed_dim)
        self.c_x = nn.Linear(width, embed_dim)  # unused by inference; kept for the layout
        self.c_out = nn.Linear(embed_dim, width)
        self.cb_weight = nn.Parameter(torch.ones(embed_dim))
        self.cb_bias = nn.Parameter(torch.zeros(embed_dim))
        self.norm = RMSNorm(embed_dim, eps=1e-5, trainable=False)

    def get_codebook(self):
        return self.norm(self.codebook.weight * self.cb_weight + self.cb_bias)

    def project(self, h):
        """Encoder output -> unit-RMS vectors that get quantised."""
        return self.norm(self.c_in(h))

    def nearest(self, z):
        with torch.no_grad():
            cb = self.get_codebook()
            d = (z * z).sum(-1, keepdim=True) - 2 * z @ cb.t() + (cb * cb).sum(-1)
            return d.argmin(-1)


class _Bottleneck(nn.Module):
    def __init__(self, block):
        super().__init__()
        self.block = block


class ShapeDecoder(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        w = cfg["width"]
        pe = F.normalize(torch.randn(cfg["num_encoder_latents"], w), dim=-1)
        self.positional_encodings = nn.Parameter(_sorted_by_distance_to_first(pe))
        self.blocks = nn.ModuleList([SelfLayer(w, cfg["num_heads"], cfg["eps"])
                                     for _ in range(cfg["num_decoder_layers"])])

    def forward(self, z):
        h = z + self.positional_encodings
        for block in self.blocks:
            h = block(h)
        return h


class OccupancyDecoder(nn.Module):
    def __init__(self, cfg, embedder):
        super().__init__()
        w = cfg["width"]
        self.embedder = embedder
        self.query_in = MLPEmbedder(embedder.out_dim, w)
        self.attn_out = CrossLayer(w, cfg["num_heads"], cfg["eps"])
        self.ln_f = nn.LayerNorm(w, eps=cfg["eps"])
        self.c_head = nn.Linear(w, 1)

    def forward(self, queries, latents):
        x = self.attn_out(self.query_in(self.embedder(queries)), latents)
        return self.c_head(self.ln_f(x)).squeeze(-1)


def _tfixup(module, layers):
    """Scales residual-branch output weights down with depth, as the reference initialises."""
    with torch.no_grad():
        for name, p in module.named_parameters():
            if name.endswith(("c_proj.weight", "up_proj.weight", "down_proj.weight")):
                p.mul_((4 * layers) ** -0.25)
            elif name.endswith("c_v.weight"):
                p.mul_((4 * layers) ** -0.25 * math.sqrt(2))


class ShapeAutoEncoder(nn.Module):
    """forward(points, normals, queries, quantise) -> (occupancy logits, aux dict)."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = dict(cfg)
        self.embedder = FourierEmbedder(cfg["num_freqs"])
        self.encoder = ShapeEncoder(cfg, self.embedder)
        self.bottleneck = _Bottleneck(SphericalVQ(cfg["width"], cfg["embed_dim"], cfg["num_codes"]))
        self.decoder = ShapeDecoder(cfg)
        self.occupancy_decoder = OccupancyDecoder(cfg, self.embedder)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, std=math.sqrt(1.0 / m.in_features))
                nn.init.zeros_(m.bias)
        _tfixup(self.encoder, cfg["num_encoder_layers"])
        _tfixup(self.decoder, cfg["num_decoder_layers"])

    @property
    def vq(self):
        return self.bottleneck.block

    def encode(self, points, normals):
        """Continuous (pre-quantisation) vectors [B, L, E]."""
        return self.vq.project(self.encoder(points, normals))

    def forward(self, points, normals, queries, quantise):
        z = self.encode(points, normals)
        aux = {"z": z}
        if quantise:
            idx = self.vq.nearest(z)
            zq = self.vq.get_codebook()[idx]
            aux["indices"] = idx
            aux["codebook_loss"] = F.mse_loss(zq, z.detach())
            aux["commit_loss"] = F.mse_loss(z, zq.detach())
            z = z + (zq - z).detach()
        latents = self.decoder(self.vq.c_out(z))
        return self.occupancy_decoder(queries, latents), aux

    def decode_indices(self, idx, queries):
        latents = self.decoder(self.vq.c_out(self.vq.get_codebook()[idx]))
        return self.occupancy_decoder(queries, latents)


# --------------------------------------------------------------------------------------
# GPT (DualStreamRoformer)


class Rotary:
    """Real-valued interleaved RoPE: pairs (2i, 2i+1) rotate by pos * theta^(-2i/d)."""

    def __init__(self, head_dim, theta):
        self.inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
        self.tables = {}

    def table(self, cond_len, shape_len, device="cpu"):
        """(cos, sin) [cond_len + shape_len, head_dim] on `device`, computed on the CPU so that
        every device uses the same values."""
        key = (cond_len, shape_len, str(device))
        if key not in self.tables:
            pos = torch.cat([torch.zeros(cond_len), torch.arange(shape_len, dtype=torch.float32)])
            ang = torch.outer(pos, self.inv).repeat_interleave(2, dim=-1)
            self.tables[key] = (ang.cos().to(device), ang.sin().to(device))
        return self.tables[key]


def apply_rotary(x, cos, sin):
    """x [B,H,T,D]; cos/sin [T,D]."""
    pairs = x.unflatten(-1, (-1, 2))
    swapped = torch.stack([-pairs[..., 1], pairs[..., 0]], dim=-1).flatten(-2)
    return x * cos + swapped * sin


class SwiGLU(nn.Module):
    def __init__(self, width, bias):
        super().__init__()
        self.gate_proj = nn.Linear(width, 4 * width, bias=bias)
        self.up_proj = nn.Linear(width, 4 * width, bias=bias)
        self.down_proj = nn.Linear(4 * width, width, bias=bias)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class PreAttention(nn.Module):
    def __init__(self, width, heads, bias, query=True):
        super().__init__()
        self.heads = heads
        self.query = query
        hd = width // heads
        if query:
            self.c_qk = nn.Linear(width, 2 * width, bias=False)
            self.q_norm = RMSNorm(hd)
        else:
            self.c_k = nn.Linear(width, width, bias=bias)
        self.k_norm = RMSNorm(hd)
        self.c_v = nn.Linear(width, width, bias=bias)

    def forward(self, x):
        if self.query:
            q, k = self.c_qk(x).chunk(2, dim=-1)
            q = self.q_norm(split_heads(q, self.heads))
        else:
            q, k = None, self.c_k(x)
        return q, self.k_norm(split_heads(k, self.heads)), split_heads(self.c_v(x), self.heads)


class PostAttention(nn.Module):
    def __init__(self, width, bias, eps):
        super().__init__()
        self.eps = eps
        self.c_proj = nn.Linear(width, width, bias=bias)
        self.mlp = SwiGLU(width, bias)

    def forward(self, x, a):
        x = x + self.c_proj(a)
        return x + self.mlp(layer_norm(x, self.eps))


class DualAttention(nn.Module):
    def __init__(self, width, heads, bias, cond_pre_only):
        super().__init__()
        self.cond_pre_only = cond_pre_only
        self.pre_x = PreAttention(width, heads, bias)
        self.pre_c = PreAttention(width, heads, bias, query=not cond_pre_only)


class DualBlock(nn.Module):
    def __init__(self, width, heads, bias, eps, cond_pre_only):
        super().__init__()
        self.eps = eps
        self.cond_pre_only = cond_pre_only
        self.attn = DualAttention(width, heads, bias, cond_pre_only)
        self.post_1 = PostAttention(width, bias, eps)
        if not cond_pre_only:
            self.post_2 = PostAttention(width, bias, eps)

    def forward(self, x, c, cos, sin, bias):
        s = c.shape[1]
        qx, kx, vx = self.attn.pre_x(layer_norm(x, self.eps))
        qc, kc, vc = self.attn.pre_c(layer_norm(c, self.eps))
        k = apply_rotary(torch.cat([kc, kx], dim=2), cos, sin)
        v = torch.cat([vc, vx], dim=2)
        if self.cond_pre_only:
            q = apply_rotary(qx, cos[s:], sin[s:])
            a = merge_heads(attention(q, k, v, bias[s:]))
            return self.post_1(x, a), None
        q = apply_rotary(torch.cat([qc, qx], dim=2), cos, sin)
        a = merge_heads(attention(q, k, v, bias))
        return self.post_1(x, a[:, s:]), self.post_2(c, a[:, :s])


class SingleAttention(nn.Module):
    def __init__(self, width, heads, bias):
        super().__init__()
        self.heads = heads
        self.c_qk = nn.Linear(width, 2 * width, bias=False)
        self.c_v = nn.Linear(width, width, bias=bias)
        self.c_proj = nn.Linear(width, width, bias=bias)
        self.q_norm = RMSNorm(width // heads)
        self.k_norm = RMSNorm(width // heads)

    def forward(self, x, cos, sin, bias):
        q, k = self.c_qk(x).chunk(2, dim=-1)
        q = apply_rotary(self.q_norm(split_heads(q, self.heads)), cos, sin)
        k = apply_rotary(self.k_norm(split_heads(k, self.heads)), cos, sin)
        v = split_heads(self.c_v(x), self.heads)
        return self.c_proj(merge_heads(attention(q, k, v, bias)))


class SingleBlock(nn.Module):
    def __init__(self, width, heads, bias, eps):
        super().__init__()
        self.eps = eps
        self.attn = SingleAttention(width, heads, bias)
        self.mlp = SwiGLU(width, bias)

    def forward(self, x, cos, sin, bias):
        x = x + self.attn(layer_norm(x, self.eps), cos, sin, bias)
        return x + self.mlp(layer_norm(x, self.eps))


class _Transformer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        w, h, b, e = cfg["n_embd"], cfg["n_head"], cfg["bias"], cfg["eps"]
        self.wte = nn.Embedding(cfg["shape_model_vocab_size"] + 3, w)
        self.dual_blocks = nn.ModuleList([DualBlock(w, h, b, e, i == cfg["n_layer"] - 1)
                                          for i in range(cfg["n_layer"])])
        self.single_blocks = nn.ModuleList([SingleBlock(w, h, b, e) for _ in range(cfg["n_single_layer"])])


class DualStreamGPT(nn.Module):
    """logits(embed [B,L,W], cond [B,S,W]) -> [B, L, V+3], causal over [cond ; embed]."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = dict(cfg)
        w = cfg["n_embd"]
        self.codes = cfg["shape_model_vocab_size"]
        self.bos_id = self.codes
        self.text_proj = nn.Linear(cfg["text_model_embed_dim"], w, bias=cfg["bias"])
        self.shape_proj = nn.Linear(cfg["shape_model_embed_dim"], w)
        self.transformer = _Transformer(cfg)
        self.lm_head = nn.Linear(w, self.codes + 3, bias=False)
        if cfg["use_bbox"]:
            self.bbox_proj = nn.Linear(3, w)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, std=0.02)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
        nn.init.normal_(self.transformer.wte.weight, std=0.02)
        with torch.no_grad():
            scale = (2 * (cfg["n_layer"] + cfg["n_single_layer"])) ** -0.5
            for name, p in self.named_parameters():
                if name.endswith(("c_proj.weight", "down_proj.weight")):
                    p.mul_(scale)
        self.rotary = Rotary(w // cfg["n_head"], cfg["rope_theta"])
        self.masks = {}

    def _mask(self, total, device="cpu"):
        key = (total, str(device))
        if key not in self.masks:
            self.masks[key] = torch.triu(torch.full((total, total), float("-inf")), 1).to(device)
        return self.masks[key]

    def condition(self, text_hidden, bbox):
        """cond = text_proj(last_hidden_state) [+ bbox_proj(bbox) as one more token]."""
        cond = self.text_proj(text_hidden)
        if self.cfg["use_bbox"]:
            cond = torch.cat([cond, self.bbox_proj(bbox).unsqueeze(1)], dim=1)
        return cond

    def token_table(self, codebook):
        """The input embedding table as the engine builds it: rows 0..V-1 =
        shape_proj(codebook), the specials from wte."""
        return torch.cat([self.shape_proj(codebook), self.transformer.wte.weight[self.codes:]], dim=0)

    def forward(self, embed, cond):
        s, l = cond.shape[1], embed.shape[1]
        cos_d, sin_d = self.rotary.table(s, l, embed.device)
        return self._run(embed, cond, cos_d, sin_d, self._mask(s + l, embed.device), self._mask(l, embed.device))

    def forward_visible(self, embed, cond, positions, visible):
        """logits for shape rows at rotary `positions` [L] where row i sees shape row j when
        visible[i, j] (bool [L, L]); the condition stays a causal prefix every shape row sees.
        A block-diffusion model runs with block_causal_visibility (below). The tables and masks
        are built on the CPU, as in forward(), and moved to embed's device."""
        s, l = cond.shape[1], embed.shape[1]
        pos = torch.cat([torch.zeros(s), positions.cpu().to(torch.float32)])
        ang = torch.outer(pos, self.rotary.inv).repeat_interleave(2, dim=-1)
        cos_d, sin_d = ang.cos(), ang.sin()
        shape_bias = torch.zeros(l, l).masked_fill(~visible.cpu(), float("-inf"))
        bias = torch.full((s + l, s + l), float("-inf"))
        bias[:s, :s] = self._mask(s)
        bias[s:, :s] = 0.0
        bias[s:, s:] = shape_bias
        device = embed.device
        return self._run(embed, cond, cos_d.to(device), sin_d.to(device), bias.to(device), shape_bias.to(device))

    def _run(self, embed, cond, cos_d, sin_d, bias, bias_s):
        s = cond.shape[1]
        x, c = embed, cond
        for block in self.transformer.dual_blocks:
            x, c = block(x, c, cos_d, sin_d, bias)
        if len(self.transformer.single_blocks):
            cos_s, sin_s = cos_d[s:], sin_d[s:]
            for block in self.transformer.single_blocks:
                x = block(x, cos_s, sin_s, bias_s)
        return self.lm_head(layer_norm(x, self.cfg["eps"]))


def block_causal_visibility(length, block_size):
    """[L, L] bool: shape row i sees row j when j's block is not after i's (bidirectional inside
    a block, causal across blocks). Block size 1 is the autoregressive causal mask."""
    block = torch.arange(length) // block_size
    return block[None, :] <= block[:, None]


# --------------------------------------------------------------------------------------
# safetensors (F32), written and read without the safetensors package


def save_safetensors(path, tensors):
    import json
    import struct

    header, offset, blobs = {}, 0, []
    for name in sorted(tensors):
        t = tensors[name].detach().to(torch.float32).contiguous().cpu()
        data = t.numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)


def load_safetensors(path):
    import json
    import struct

    import numpy as np

    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] != "F32":
            raise ValueError(f"{path}: tensor {name} is {info['dtype']}; this reader takes F32 only")
        a, b = info["data_offsets"]
        out[name] = torch.from_numpy(np.frombuffer(data[a:b], dtype=np.float32).copy()).reshape(info["shape"])
    return out
