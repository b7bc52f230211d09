"""Split GGUF files (``NAME-00001-of-00003.gguf``): the shard names that belong together."""
from __future__ import annotations

import re

SPLIT_RE = re.compile(r"^(?P<stem>.*)-(?P<no>\d{5})-of-(?P<count>\d{5})\.gguf$")


def shard_specs(spec: str) -> list[str]:
    """All shards of a split file named by its first shard (llama.cpp's naming), else ``[spec]``."""
    m = SPLIT_RE.match(spec)
    if not m or int(m["no"]) != 1:
        return [spec]
    count = int(m["count"])
    return [f"{m['stem']}-{i:05d}-of-{count:05d}.gguf" for i in range(1, count + 1)]
