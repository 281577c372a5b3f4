"""G2PW's network (g2pW, GitYCC/g2pW, Apache-2.0: "a conditional weighted softmax BERT"), which GPT-SoVITS
runs from the released `G2PWModel/g2pW.onnx` through onnxruntime; koe runs it as a torch module with the
ONNX file's weights.

For each query (a polyphonic character in a sentence), in the configuration the release was trained with:

* a BERT encoder reads the sentence; the query character's last hidden state is taken (`position_ids`
  index the tokens; a batch of one sentence serves every query, as upstream's de-duplicated calls pass it);
* a part-of-speech head (11 tags) picks the query's tag (argmax);
* the conditional weights: `sigmoid(bias + char_descriptor[char] + second_order_descriptor[char * 11 + tag])`,
  one per label, multiply the label mask (1 for the readings the character has, else 0);
* the classifier's logits go through the weighted softmax (`exp(logit - max) * weight`, normalised) and
  are clamped to [1e-6, 1 - 1e-6]: the probabilities upstream takes the argmax of.

`read_g2pw_onnx` reads the weights by the names the exporter keeps (embeddings, layer norms, biases,
the Gemm weights of the two heads) and takes each projection's weight from the MatMul whose output
that projection's named bias is added to (the exporter folds the transposed weights into anonymous
constants, `onnx::MatMul_1234`), so the file's node names do not matter.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch
from torch import nn

from koe.engines.gpt_sovits.bert import Bert, BertConfig
from koe.runtime.onnx_weights import Graph, read_graph

__all__ = ["POS_TAGS", "G2PWNet", "G2PWWeightsError", "read_g2pw_onnx"]

POS_TAGS = ("UNK", "A", "C", "D", "I", "N", "P", "T", "V", "DE", "SHI")  # g2pW's part-of-speech tags, in its order
HEAD_DIM = 64  # bert-base-chinese's (g2pW's encoder): the ONNX weights do not say how many heads


class G2PWWeightsError(ValueError):
    """A g2pW ONNX file lacks a weight of the network koe builds, or holds one of another shape."""


class G2PWNet(nn.Module):
    """g2pW's network in its released configuration (see the module docstring)."""

    EPS = 1e-6  # the probabilities' clamp

    def __init__(self, bert: BertConfig, labels: int, chars: int) -> None:
        super().__init__()
        self.bert = Bert(bert)
        self.classifier = nn.Linear(bert.hidden_size, labels)
        self.pos_classifier = nn.Linear(bert.hidden_size, len(POS_TAGS))
        self.descriptor_bias = nn.Embedding(1, labels)
        self.char_descriptor = nn.Embedding(chars, labels)
        self.second_order_descriptor = nn.Embedding(chars * len(POS_TAGS), labels)

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        phoneme_mask: torch.Tensor,
        char_ids: torch.Tensor,
        position_ids: torch.Tensor,
    ) -> torch.Tensor:
        """Token ids, types and mask (B, T) with B = 1 or N, the label masks (N, L), the query characters'
        ids (N,) and token positions (N,) -> the clamped label probabilities (N, L)."""
        hidden = self.bert(input_ids, token_type_ids, attention_mask)[-1]  # (B, T, C)
        rows = torch.arange(input_ids.shape[0], device=hidden.device)
        selected = hidden[rows, position_ids]  # (N, C): one sentence's states broadcast over its queries
        tags = self.pos_classifier(selected).argmax(dim=-1)  # (N,)
        affect = self.descriptor_bias(torch.zeros_like(char_ids)) + self.char_descriptor(char_ids)
        affect = affect + self.second_order_descriptor(char_ids * len(POS_TAGS) + tags)
        weights = phoneme_mask * torch.sigmoid(affect)
        logits = self.classifier(selected)
        top = logits.max(dim=-1, keepdim=True).values
        weighted = torch.exp(logits - top) * weights
        probs = weighted / weighted.sum(dim=-1, keepdim=True)
        return probs.clamp(min=self.EPS, max=1 - self.EPS)


def _projection_weights(graph: Graph, wanted: set[str]) -> dict[str, torch.Tensor]:
    # a Linear on (B, T, C) exports as MatMul(x, W^T) then Add(., bias): the bias keeps its name
    consumers: dict[str, list] = {}
    for node in graph.nodes:
        for name in node.inputs:
            consumers.setdefault(name, []).append(node)
    found = {}
    for node in graph.nodes:
        if node.op_type != "MatMul" or (weight := graph.static(node.inputs[1])) is None:
            continue
        for add in consumers.get(node.outputs[0], []):
            if add.op_type != "Add":
                continue
            for name in add.inputs:
                if name.endswith(".bias") and name[: -len("bias")] + "weight" in wanted:
                    found[name[: -len("bias")] + "weight"] = weight.t()
    return found


def _gemm_weights(graph: Graph, wanted: set[str]) -> dict[str, torch.Tensor]:
    # a Linear on (N, C) exports as Gemm(x, W, bias) with transB=1 (or W^T and transB=0)
    found = {}
    for node in graph.find("Gemm"):
        if len(node.inputs) < 3 or not node.inputs[2].endswith(".bias"):
            continue
        weight = graph.static(node.inputs[1])
        key = node.inputs[2][: -len("bias")] + "weight"
        if weight is not None and key in wanted:
            found[key] = weight if node.attributes.get("transB", 0) else weight.t()
    return found


def read_g2pw_onnx(path: str | os.PathLike, labels: int, chars: int) -> G2PWNet:
    """The network of a g2pW ONNX file (the release's `g2pW.onnx`) with its weights, float32, in eval mode.
    `labels` and `chars` come from the model folder's POLYPHONIC_CHARS.txt and must match the file's."""
    graph = read_graph(Path(path))
    init = graph.initializers
    words = init.get("bert.embeddings.word_embeddings.weight")
    if words is None:
        raise G2PWWeightsError(f"{path}: no bert.embeddings.word_embeddings.weight: not a g2pW export")
    hidden = words.shape[1]
    layers = 1 + max((int(k.split(".")[3]) for k in init if k.startswith("bert.encoder.layer.")), default=-1)
    intermediate = init["bert.encoder.layer.0.intermediate.dense.bias"].shape[0] if layers else 4 * hidden
    config = BertConfig(
        vocab_size=words.shape[0],
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=max(1, hidden // HEAD_DIM),
        intermediate_size=intermediate,
        max_position_embeddings=init["bert.embeddings.position_embeddings.weight"].shape[0],
        type_vocab_size=init["bert.embeddings.token_type_embeddings.weight"].shape[0],
    )
    net = G2PWNet(config, labels, chars)
    expected = net.state_dict()
    wanted = set(expected)
    state = {k: v for k, v in init.items() if k in wanted}
    state.update(_projection_weights(graph, wanted))
    state.update(_gemm_weights(graph, wanted))
    missing = sorted(wanted - set(state))
    if missing:
        raise G2PWWeightsError(f"{path}: the g2pW network's weights {missing[:5]}{' ...' if len(missing) > 5 else ''} are not in the file")
    for key, value in state.items():
        if tuple(value.shape) != tuple(expected[key].shape):
            raise G2PWWeightsError(f"{path}: {key} is {tuple(value.shape)}, the model folder's tables make it {tuple(expected[key].shape)}")
    net.load_state_dict({k: v.float() for k, v in state.items()})
    return net.eval()
