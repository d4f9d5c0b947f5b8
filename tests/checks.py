"""The Python test scripts' tally (parity, router): each check said as it goes, the counts kept
for the closing line."""


class Checks:
    def __init__(self, say=print):
        self.passed = 0
        self.failed = 0
        self.say = say

    def check(self, name, ok, detail=""):
        if ok:
            self.passed += 1
            self.say(f"ok    {name}")
        else:
            self.failed += 1
            self.say(f"FAIL  {name}" + (f": {detail}" if detail else ""))
        return ok
