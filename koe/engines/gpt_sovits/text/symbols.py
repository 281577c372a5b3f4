"""GPT-SoVITS's phoneme inventories: a phoneme's id is its row in the text embedding of the AR model
(`model.ar_text_embedding.word_embeddings`) and of SoVITS's text encoder (`enc_p.text_embedding`),
so the order here is the released checkpoints' and never changes.

Upstream builds both tables the same way: the union of a pad `_`, the pinyin initials and the toned
pinyin finals (Mandarin), the OpenJTalk phonemes (Japanese), the punctuation and special tokens, and
the ARPAbet phonemes of CMUdict (English), sorted as Python sorts strings. v1 (322 symbols) is that
sorted list; v2 (732) appends, unsorted against it, the Japanese pitch marks `[` `]`, the Hangul
jamo of its Korean front end (plus 空 and 停) sorted, and its Cantonese (Jyutping) syllable parts,
each prefixed with `Y`, sorted. v2Pro, v2ProPlus, v3 and v4 read v2's table.
"""

from __future__ import annotations

import functools

__all__ = ["ARPABET", "PUNCTUATION", "SYMBOLS_V1", "SYMBOLS_V2", "phone_ids", "symbol_table", "symbols"]

PAD = "_"
PUNCTUATION = ("!", "?", "…", ",", ".", "-")
"""The pause marks the front ends keep as phonemes (`-` from English apostrophes, ties and dashes)."""
SPECIAL = ("SP", "SP2", "SP3", "UNK")
"""SP: a pause; SP2 / SP3: the pauses Chinese text asks for with ￥ and ^; UNK: any phone not in the table."""

_PINYIN_INITIALS = "AA EE OO b c ch d f g h j k l m n p q r s sh t w x y z zh".split()
_PINYIN_FINALS = "E En a ai an ang ao e ei en eng er i i0 ia ian iang iao ie in ing iong ir iu o ong ou u ua uai uan uang ui un uo v van ve vn".split()
_JAPANESE = "I N U a b by ch cl d dy e f g gy h hy i j k ky m my n ny o p py r ry s sh t ts u v w y z".split()
ARPABET = frozenset(
    "AA0 AA1 AA2 AE0 AE1 AE2 AH0 AH1 AH2 AO0 AO1 AO2 AW0 AW1 AW2 AY0 AY1 AY2 B CH D DH EH0 EH1 EH2 ER ER0 ER1 ER2 "
    "EY0 EY1 EY2 F G HH IH IH0 IH1 IH2 IY0 IY1 IY2 JH K L M N NG OW0 OW1 OW2 OY0 OY1 OY2 P R S SH T TH UH0 UH1 UH2 "
    "UW0 UW1 UW2 V W Y Z ZH".split()
)
"""The 71 ARPAbet phonemes the English front end may give (CMUdict's, with `ER` and `IH` unstressed
as g2p_en's model never writes them; g2p_en's bare `UW` is dropped by the front end)."""
_JAPANESE_PITCH = ("[", "]")
_KOREAN = "ㄱㄴㄷㄹㅁㅂㅅㅇㅈㅊㅋㅌㅍㅎㄲㄸㅃㅆㅉㅏㅓㅗㅜㅡㅣㅐㅔ空停"
_CANTONESE = (
    "Ya Ya1 Ya2 Ya3 Ya4 Ya5 Ya6 Yaa Yaa1 Yaa2 Yaa3 Yaa4 Yaa5 Yaa6 Yaai1 Yaai2 Yaai3 Yaai4 Yaai5 Yaai6 Yaak1 Yaak2 Yaak3 "
    "Yaak4 Yaak5 Yaak6 Yaam1 Yaam2 Yaam3 Yaam4 Yaam5 Yaam6 Yaan1 Yaan2 Yaan3 Yaan4 Yaan5 Yaan6 Yaang1 Yaang2 Yaang3 "
    "Yaang4 Yaang5 Yaang6 Yaap1 Yaap2 Yaap3 Yaap4 Yaap5 Yaap6 Yaat1 Yaat2 Yaat3 Yaat4 Yaat5 Yaat6 Yaau1 Yaau2 Yaau3 "
    "Yaau4 Yaau5 Yaau6 Yai Yai1 Yai2 Yai3 Yai4 Yai5 Yai6 Yak Yak1 Yak2 Yak3 Yak4 Yak5 Yak6 Yam1 Yam2 Yam3 Yam4 Yam5 "
    "Yam6 Yan1 Yan2 Yan3 Yan4 Yan5 Yan6 Yang1 Yang2 Yang3 Yang4 Yang5 Yang6 Yap1 Yap2 Yap3 Yap4 Yap5 Yap6 Yat1 Yat2 "
    "Yat3 Yat4 Yat5 Yat6 Yau Yau1 Yau2 Yau3 Yau4 Yau5 Yau6 Yb Yc Yd Ye Ye1 Ye2 Ye3 Ye4 Ye5 Ye6 Yei1 Yei2 Yei3 Yei4 "
    "Yei5 Yei6 Yek1 Yek2 Yek3 Yek4 Yek5 Yek6 Yeng1 Yeng2 Yeng3 Yeng4 Yeng5 Yeng6 Yeoi1 Yeoi2 Yeoi3 Yeoi4 Yeoi5 Yeoi6 "
    "Yeon1 Yeon2 Yeon3 Yeon4 Yeon5 Yeon6 Yeot1 Yeot2 Yeot3 Yeot4 Yeot5 Yeot6 Yf Yg Yg1 Yg2 Yg3 Yg4 Yg5 Yg6 Ygw Yh Yi1 "
    "Yi2 Yi3 Yi4 Yi5 Yi6 Yik1 Yik2 Yik3 Yik4 Yik5 Yik6 Yim1 Yim2 Yim3 Yim4 Yim5 Yim6 Yin1 Yin2 Yin3 Yin4 Yin5 Yin6 "
    "Ying1 Ying2 Ying3 Ying4 Ying5 Ying6 Yip1 Yip2 Yip3 Yip4 Yip5 Yip6 Yit1 Yit2 Yit3 Yit4 Yit5 Yit6 Yiu1 Yiu2 Yiu3 "
    "Yiu4 Yiu5 Yiu6 Yj Yk Yk1 Yk2 Yk3 Yk4 Yk5 Yk6 Ykw Yl Ym Ym1 Ym2 Ym3 Ym4 Ym5 Ym6 Yn Yn1 Yn2 Yn3 Yn4 Yn5 Yn6 Yng Yo "
    "Yo1 Yo2 Yo3 Yo4 Yo5 Yo6 Yoe1 Yoe2 Yoe3 Yoe4 Yoe5 Yoe6 Yoek1 Yoek2 Yoek3 Yoek4 Yoek5 Yoek6 Yoeng1 Yoeng2 Yoeng3 "
    "Yoeng4 Yoeng5 Yoeng6 Yoi Yoi1 Yoi2 Yoi3 Yoi4 Yoi5 Yoi6 Yok Yok1 Yok2 Yok3 Yok4 Yok5 Yok6 Yon Yon1 Yon2 Yon3 Yon4 "
    "Yon5 Yon6 Yong1 Yong2 Yong3 Yong4 Yong5 Yong6 Yot1 Yot2 Yot3 Yot4 Yot5 Yot6 You You1 You2 You3 You4 You5 You6 Yp "
    "Yp1 Yp2 Yp3 Yp4 Yp5 Yp6 Ys Yt Yt1 Yt2 Yt3 Yt4 Yt5 Yt6 Yu1 Yu2 Yu3 Yu4 Yu5 Yu6 Yui1 Yui2 Yui3 Yui4 Yui5 Yui6 Yuk "
    "Yuk1 Yuk2 Yuk3 Yuk4 Yuk5 Yuk6 Yun1 Yun2 Yun3 Yun4 Yun5 Yun6 Yung1 Yung2 Yung3 Yung4 Yung5 Yung6 Yut1 Yut2 Yut3 "
    "Yut4 Yut5 Yut6 Yw Yyu1 Yyu2 Yyu3 Yyu4 Yyu5 Yyu6 Yyun1 Yyun2 Yyun3 Yyun4 Yyun5 Yyun6 Yyut1 Yyut2 Yyut3 Yyut4 "
    "Yyut5 Yyut6 Yz"
).split()


def _v1() -> tuple[str, ...]:
    toned = [final + str(tone) for tone in range(1, 6) for final in _PINYIN_FINALS]
    return tuple(sorted({PAD, *_PINYIN_INITIALS, *toned, *_JAPANESE, *PUNCTUATION, *SPECIAL, *ARPABET}))


SYMBOLS_V1: tuple[str, ...] = _v1()
SYMBOLS_V2: tuple[str, ...] = SYMBOLS_V1 + _JAPANESE_PITCH + tuple(sorted(_KOREAN)) + tuple(sorted(_CANTONESE))


def symbols(version: str) -> tuple[str, ...]:
    """The phoneme table of a model version: v1's, or v2's for every later version (upstream treats
    any version but "v1" as v2 here)."""
    return SYMBOLS_V1 if version == "v1" else SYMBOLS_V2


@functools.cache
def symbol_table(version: str) -> dict[str, int]:
    """phoneme -> id for a model version."""
    return {s: i for i, s in enumerate(symbols(version))}


def phone_ids(phones: list[str], version: str = "v2") -> list[int]:
    """The embedding ids of cleaned phonemes (upstream's `cleaned_text_to_sequence`). A phoneme not in
    the table is a KeyError, as upstream's: `clean_text` has already turned those into `UNK`."""
    table = symbol_table("v1" if version == "v1" else "v2")
    return [table[p] for p in phones]
