"""Mandarin tone sandhi as GPT-SoVITS v2 applies it (upstream `GPT_SoVITS/text/tone_sandhi.py`, itself
PaddleSpeech's, Apache-2.0): the word segmentation is first re-merged (不 with the word after it, 一 with a
reduplicated verb around it or the word after it, reduplications, runs of third tones up to three
characters, 儿 onto the word before it), then each word's finals get 不 and 一 sandhi, the neutral tone
(reduplications, particles, 们/子, locatives, directional complements, the measure word 个, a fixed list
of words) and third-tone sandhi, in that order.

Everything here works on (word, part-of-speech) pairs from jieba's tagger and on finals in pypinyin's
FINALS_TONE3 style with 5 for the neutral tone ("ia1", "i5"). Splitting a word into two for the neutral
and third-tone rules uses jieba's `cut_for_search`, handed in by the caller (`ToneSandhi(cut_for_search)`),
so this module imports no segmenter itself.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from pypinyin import Style, lazy_pinyin

logger = logging.getLogger(__name__)

# Words upstream always ends in the neutral tone, and words it never touches for reduplication or 们/子.
NEUTRAL_WORDS = frozenset(
    """
一辈 丈人 丈夫 上司 上头 下巴 下水 不在 不由 世故 东家 东西 两口 丧气 丫头 主意 买卖 事情 云彩 交情 亲家 亲戚 人家 什么 介绍 休息 伙计 似的 位置 体面 作坊 佩服 使唤 便宜 倒腾 兄弟 先生 关系 养活 冒失 冤家 冤枉 冷战 凉快 凑合 凤凰 出息 分析 利害 利索
利落 别扭 刺激 刺猬 前头 力气 功夫 动弹 动静 勤快 匀称 包涵 包袱 千斤 厉害 厚道 口袋 叫唤 吆喝 合同 吉他 名堂 名字 后头 吓唬 含糊 告示 告诉 和尚 咕噜 咖喱 咳嗽 哆嗦 哈欠 哑巴 唾沫 商量 喇叭 喇嘛 喉咙 喜欢 喽啰 嘀咕 嘟囔 嘱咐 嘴巴 困难 在乎 地方 地道
壮实 外甥 多么 多少 大人 大夫 大意 大方 大爷 太阳 头发 女婿 奴才 妖精 妥当 妯娌 姐夫 姑娘 委屈 姥爷 娘家 婆家 媒人 媳妇 嫁妆 字号 学生 学问 官司 实在 客气 家伙 寒碜 寡妇 对付 对头 将就 小伙 小气 少爷 尾巴 屁股 岁数 工夫 差事 巴掌 巴结 师傅 师父 希罕
帐篷 帮手 干事 幸福 庄稼 应酬 开通 弄堂 弟兄 张罗 得罪 心思 志气 忙活 快活 念叨 念头 怎么 思量 怪物 悟性 情形 惦记 意思 意识 懒得 戒指 扁担 扎实 扑腾 打发 打听 打扮 打点 打算 打量 扫帚 扫把 折腾 护士 报复 抬举 拖沓 招呼 招牌 拨弄 拳头 拾掇 指头 指甲
挑剔 挖苦 提防 收成 收拾 故事 新鲜 时候 明白 暖和 月亮 月饼 朋友 木匠 木头 本事 机灵 枇杷 枕头 架势 柴火 栅栏 核桃 棉花 棒槌 棺材 槟榔 模糊 欺负 正经 母亲 比方 泥鳅 活泼 浪头 消息 清楚 温和 溜达 滑溜 漂亮 火候 灯笼 炊帚 点心 烂糊 烟筒 烧饼 热闹 照顾
熟悉 爱人 父亲 爽快 牌楼 牙碜 牢骚 牲口 特务 状元 狐狸 玄乎 玫瑰 玻璃 琉璃 琢磨 琵琶 甘蔗 甜头 生意 畜生 疏忽 疙瘩 疟疾 痛快 痢疾 白净 盘算 盘缠 相声 眉毛 眨巴 眯缝 眼睛 知识 石匠 石头 石榴 码头 砚台 祖宗 福气 秀才 秀气 秧歌 称呼 稀罕 稳当 窗户 窝囊
窟窿 笑话 笑语 笤帚 答应 算盘 算计 篱笆 簸箕 粮食 精神 糊涂 糟蹋 糨糊 累赘 红火 结实 编辑 罐头 罗嗦 翻腾 老太 老头 老婆 老实 老爷 耳朵 耷拉 耽搁 耽误 聪明 胡同 胡琴 胡萝 胭脂 胳膊 能耐 脊梁 脑袋 脾气 膏药 自在 舌头 舒坦 舒服 芝麻 苍蝇 苗头 苗条 荒唐
荸荠 菩萨 萝卜 葡萄 葫芦 薄荷 蘑菇 蚂蚱 蛤蟆 蜡烛 行当 行李 街坊 衙门 衣服 衣裳 补丁 裁缝 见识 规矩 计划 认识 记号 记性 讲究 豆腐 财主 费用 趔趄 跟头 跳蚤 踏实 转悠 软和 过去 运气 这个 这么 连累 迷糊 造化 逻辑 道士 邋遢 那个 那么 部分 里头 里脊 钥匙
铁匠 铃铛 铺盖 锄头 门道 闺女 阔气 队伍 难为 风筝 馄饨 馒头 首饰 马虎 骆驼 骨头 高粱 鸳鸯 麻利 麻烦
""".split()
)

NOT_NEUTRAL_WORDS = frozenset(
    """
人人 以下 佼佼 冉冉 分子 卵子 原子 吵吵 哈哈 女子 娃哈哈 学子 家家户户 局地 干嘛 幺幺 恳恳 想想 打打 攘攘 数数 整整 死死 熙熙 瓜子 电子 男子 留得 石子 算子 考考 耕地 花花草草 莘莘 莲子 落地 虎虎 袅袅 量子 青青
""".split()
)

_PUNCTUATION = "：，；。？！“”‘’':,;.?!"  # a 一 before one of these keeps its first tone
_PARTICLES = "吧呢哈啊呐噻嘛吖嗨呐哦哒额滴哩哟喽啰耶喔诶"
_STRUCTURAL = "的地得"
_BEFORE_GE = "几有两半多各整每做是"  # 个 after these (or a numeral) is a measure word


def _with_tone(final: str, tone: str) -> str:
    return final[:-1] + tone


def _all_third(finals: Iterable[str]) -> bool:
    return all(f[-1] == "3" for f in finals)


def _is_reduplication(word: str) -> bool:
    return len(word) == 2 and word[0] == word[1]


def _finals(word: str) -> list[str]:
    return lazy_pinyin(word, neutral_tone_with_five=True, style=Style.FINALS_TONE3)


class ToneSandhi:
    """The merges (`pre_merge_for_modify`) and the per-word tone changes (`modified_tone`) of upstream v2."""

    def __init__(self, cut_for_search: Callable[[str], Iterable[str]]):
        self.cut_for_search = cut_for_search

    # --- a word's two parts -------------------------------------------------------------------------
    def split_word(self, word: str) -> list[str]:
        """Two parts of `word`: its shortest `cut_for_search` piece (the first of equal lengths, in the
        order jieba gives them) and the rest, in the order they stand in the word. The piece counts as
        the head when `word` starts with it, else as the tail (upstream's test is `find == 0`)."""
        shortest = sorted(self.cut_for_search(word), key=len)[0]
        if word.find(shortest) == 0:
            return [shortest, word[len(shortest) :]]
        return [word[: -len(shortest)], shortest]

    # --- the tone rules, per word --------------------------------------------------------------------
    @staticmethod
    def bu_sandhi(word: str, finals: list[str]) -> list[str]:
        """不 in the middle of three characters is neutral (看不懂); else 不 before a fourth tone is bu2."""
        if len(word) == 3 and word[1] == "不":
            finals[1] = _with_tone(finals[1], "5")
            return finals
        for i, char in enumerate(word):
            if char == "不" and i + 1 < len(word) and finals[i + 1][-1] == "4":
                finals[i] = _with_tone(finals[i], "2")
        return finals

    @staticmethod
    def yi_sandhi(word: str, finals: list[str]) -> list[str]:
        """一 among digits keeps its tone (一零零); between a reduplication it is neutral (看一看); 第一 is
        yi1; otherwise yi2 before a fourth tone and yi4 before anything but punctuation."""
        if "一" in word and all(c.isnumeric() for c in word if c != "一"):
            return finals
        if len(word) == 3 and word[1] == "一" and word[0] == word[-1]:
            finals[1] = _with_tone(finals[1], "5")
        elif word.startswith("第一"):
            finals[1] = _with_tone(finals[1], "1")
        else:
            for i, char in enumerate(word):
                if char != "一" or i + 1 >= len(word):
                    continue
                if finals[i + 1][-1] == "4":
                    finals[i] = _with_tone(finals[i], "2")
                elif word[i + 1] not in _PUNCTUATION:
                    finals[i] = _with_tone(finals[i], "4")
        return finals

    def neutral_sandhi(self, word: str, pos: str, finals: list[str]) -> list[str]:
        """The neutral tone: the second of a reduplicated character in a noun, verb or adjective (奶奶);
        then the first rule of these that applies: a final particle, 的/地/得, an aspect particle alone
        (了/着/过 tagged ul/uz/ug), 们/子 ending a pronoun or noun, 上/下/里 ending a place word,
        来/去 after a direction, 个 as a measure word, a listed word (or a listed word's last two
        characters); and at last, each of the word's two parts (`split_word`) that is listed."""
        for j in range(1, len(word)):
            if word[j] == word[j - 1] and pos[0] in "nva" and word not in NOT_NEUTRAL_WORDS:
                finals[j] = _with_tone(finals[j], "5")
        ge = word.find("个")
        last = word[-1:]
        if last and last in _PARTICLES:
            finals[-1] = _with_tone(finals[-1], "5")
        elif last and last in _STRUCTURAL:
            finals[-1] = _with_tone(finals[-1], "5")
        elif len(word) == 1 and word in "了着过" and pos in ("ul", "uz", "ug"):
            finals[-1] = _with_tone(finals[-1], "5")
        elif len(word) > 1 and last in "们子" and pos in ("r", "n") and word not in NOT_NEUTRAL_WORDS:
            finals[-1] = _with_tone(finals[-1], "5")
        elif len(word) > 1 and last in "上下里" and pos in ("s", "l", "f"):
            finals[-1] = _with_tone(finals[-1], "5")
        elif len(word) > 1 and last in "来去" and word[-2] in "上下进出回过起开":
            finals[-1] = _with_tone(finals[-1], "5")
        elif (ge >= 1 and (word[ge - 1].isnumeric() or word[ge - 1] in _BEFORE_GE)) or word == "个":
            finals[ge] = _with_tone(finals[ge], "5")
        elif word in NEUTRAL_WORDS or word[-2:] in NEUTRAL_WORDS:
            finals[-1] = _with_tone(finals[-1], "5")

        parts = self.split_word(word)
        head = len(parts[0])
        split = [finals[:head], finals[head:]]
        for part, part_finals in zip(parts, split):
            if part in NEUTRAL_WORDS or part[-2:] in NEUTRAL_WORDS:
                part_finals[-1] = _with_tone(part_finals[-1], "5")
        return split[0] + split[1]

    def three_sandhi(self, word: str, finals: list[str]) -> list[str]:
        """Third-tone sandhi: two third tones make the first a second; in three characters the split
        decides (蒙古/包: both of the first two, 纸/老虎: the middle one; otherwise a two-character part of
        third tones, or a part-final third before a part-initial third (好/喜欢)); four characters are two
        pairs, each on its own."""
        if len(word) == 2 and _all_third(finals):
            finals[0] = _with_tone(finals[0], "2")
        elif len(word) == 3:
            parts = self.split_word(word)
            if _all_third(finals):
                if len(parts[0]) == 2:
                    finals[0] = _with_tone(finals[0], "2")
                    finals[1] = _with_tone(finals[1], "2")
                elif len(parts[0]) == 1:
                    finals[1] = _with_tone(finals[1], "2")
            else:
                head = len(parts[0])
                split = [finals[:head], finals[head:]]
                for i, sub in enumerate(split):
                    if _all_third(sub) and len(sub) == 2:
                        sub[0] = _with_tone(sub[0], "2")
                    elif i == 1 and not _all_third(sub) and sub[0][-1] == "3" and split[0][-1][-1] == "3":
                        split[0][-1] = _with_tone(split[0][-1], "2")
                    finals = split[0] + split[1]
        elif len(word) == 4:
            pairs = [finals[:2], finals[2:]]
            finals = []
            for sub in pairs:
                if _all_third(sub):
                    sub[0] = _with_tone(sub[0], "2")
                finals += sub
        return finals

    def modified_tone(self, word: str, pos: str, finals: list[str]) -> list[str]:
        """A word's finals after 不, 一, neutral-tone and third-tone sandhi (in that order)."""
        finals = self.bu_sandhi(word, finals)
        finals = self.yi_sandhi(word, finals)
        finals = self.neutral_sandhi(word, pos, finals)
        return self.three_sandhi(word, finals)

    # --- the merges, on the segmentation --------------------------------------------------------------
    @staticmethod
    def merge_bu(seg: list) -> list:
        """不 joins the word after it; a 不 that ends the text stays alone, tagged d."""
        merged, last = [], ""
        for word, pos in seg:
            if last == "不":
                word = last + word
            if word != "不":
                merged.append((word, pos))
            last = word
        if last == "不":
            merged.append((last, "d"))
        return merged

    @staticmethod
    def merge_yi(seg: list) -> list:
        """一 between two equal verbs becomes one word with them (听 一 听 -> 听一听, tagged v), then a 一
        left alone takes the word after it (keeping 一's tag)."""
        joined, i = [], 0
        while i < len(seg):
            word, pos = seg[i]
            if i >= 1 and word == "一" and i + 1 < len(seg):
                before = joined[-1] if joined else seg[i - 1]
                after = seg[i + 1]
                if before[0] == after[0] and before[1] == "v" and after[1] == "v":
                    joined[-1] = [before[0] + "一" + after[0], before[1]]
                    i += 2
                    continue
            joined.append([word, pos])
            i += 1
        merged = []
        for word, pos in joined:
            if merged and merged[-1][0] == "一":
                merged[-1][0] += word
            else:
                merged.append([word, pos])
        return merged

    @staticmethod
    def merge_reduplication(seg: list) -> list:
        """A word equal to the (merged) word before it joins it."""
        merged = []
        for word, pos in seg:
            if merged and word == merged[-1][0]:
                merged[-1][0] += word
            else:
                merged.append([word, pos])
        return merged

    @staticmethod
    def _merge_third_tones(seg: list, joins: Callable[[list[str], list[str]], bool]) -> list:
        # A word joins the one before when `joins(finals before, finals)` holds, the one before did not
        # itself join, is no reduplication, and the two make at most three characters.
        finals = [_finals(word) for word, _ in seg]
        merged, joined = [], [False] * len(seg)
        for i, (word, pos) in enumerate(seg):
            previous = seg[i - 1][0] if i >= 1 else ""
            if i >= 1 and joins(finals[i - 1], finals[i]) and not joined[i - 1] and not _is_reduplication(previous) and len(previous) + len(word) <= 3:
                merged[-1][0] += word
                joined[i] = True
            else:
                merged.append([word, pos])
        return merged

    def merge_third_tones(self, seg: list) -> list:
        """Two words of third tones only join (up to three characters)."""
        return self._merge_third_tones(seg, lambda a, b: _all_third(a) and _all_third(b))

    def merge_third_tones_at_boundary(self, seg: list) -> list:
        """A word ending in a third tone and the next starting with one join (up to three characters)."""
        return self._merge_third_tones(seg, lambda a, b: a[-1][-1] == "3" and b[0][-1] == "3")

    @staticmethod
    def merge_er(seg: list) -> list:
        """儿 joins the word before it (unless that is "#")."""
        merged = []
        for i, (word, pos) in enumerate(seg):
            if i >= 1 and word == "儿" and seg[i - 1][0] != "#":
                merged[-1][0] += word
            else:
                merged.append([word, pos])
        return merged

    def pre_merge_for_modify(self, seg: list) -> list[list[str]]:
        """The segmentation re-merged for the tone rules. The 一 and third-tone merges are skipped when
        they raise (upstream catches every exception there and prints a line; this logs it): an empty
        word's finals, for one, have no last character."""
        seg = self.merge_bu(seg)
        seg = _or_unchanged(self.merge_yi, seg)
        seg = self.merge_reduplication(seg)
        seg = _or_unchanged(self.merge_third_tones, seg)
        seg = _or_unchanged(self.merge_third_tones_at_boundary, seg)
        return self.merge_er(seg)


def _or_unchanged(merge: Callable[[list], list], seg: list) -> list:
    try:
        return merge(seg)
    except Exception:  # upstream's bare except, narrowed to exceptions
        logger.warning("%s failed; the segmentation is left as it was", merge.__name__)
        return seg
