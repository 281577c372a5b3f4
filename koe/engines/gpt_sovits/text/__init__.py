"""GPT-SoVITS's text front end: text to phoneme symbols (and word-to-phone counts) per language, as
upstream's `GPT_SoVITS/text`, then to the phoneme ids its models read.

- `symbols`: the v1 / v2 phoneme tables and `phone_ids` (upstream's `cleaned_text_to_sequence`);
- `clean`: `clean_text(text, language, version)` -> phonemes, word2ph, normalised text, dispatching
  to a front end per language (`english`, `chinese`; the others plug in through the same interface);
- `segment`: the cutting methods (cut0-cut5); `lang_split`: the language splitting;
  `preprocess`: `TextPreprocessor`'s pre-segmentation and `get_phones_and_bert` before BERT.

Upstream's code is not imported: each module says which of upstream's functions it reproduces.
"""
