"""GPT-SoVITS's text front end: text to phoneme symbols (and word-to-phone counts) per language, as upstream's `GPT_SoVITS/text`."""
