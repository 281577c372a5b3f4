"""The voice library and what it reads and writes.

`library` keeps the voices under `KOE_HOME/voices/` (add, list, remove, export, import, prepared
prompts); `manifest` checks what a voice carries (voice.json's fields, the folder's file names);
`archive` reads and writes the .zip/.tar(.gz) a voice travels in, hardened against crafted ones.
"""
