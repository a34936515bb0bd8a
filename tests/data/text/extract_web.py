# Writes chapters FIRST..LAST of BOOK of the World English Bible (Debian package sword-text-web,
# public domain) as plain text: verses joined into the translation's paragraphs, Strong's tags,
# footnotes and section titles dropped. Reads web.imp from the current directory:
#   apt-get install sword-text-web libsword-utils
#   mod2imp engWEB2015eb > web.imp
#   python3 extract_web.py Genesis 37 45 > web_genesis_37-45.txt
import re, sys
book, first, last = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
verses, cur = {}, None
for line in open('web.imp', encoding='utf-8'):
    line = line.rstrip('\n')
    if line.startswith('$$$'):
        cur = line[3:]
    elif cur:
        verses.setdefault(cur, []).append(line)
chapters = []
for ch in range(first, last + 1):
    text, v = '', 1
    while f'{book} {ch}:{v}' in verses:
        text += ' ' + ' '.join(verses[f'{book} {ch}:{v}'])
        v += 1
    text = re.sub(r'<note[^>]*>.*?</note>', ' ', text)
    text = re.sub(r'<title[^>]*>.*?</title>', ' ', text)
    text = re.sub(r'<div sID="[^"]*" type="x-p"/>', '\n', text)
    text = re.sub(r'<[^>]+>', ' ', text)
    text = re.sub(r'[ \t]+', ' ', text)
    text = re.sub(r' ([,.;:!?’”])', r'\1', text)
    text = re.sub(r'([“‘]) ', r'\1', text)
    paras = [p.strip() for p in text.split('\n') if p.strip()]
    chapters.append(f'Chapter {ch}\n\n' + '\n\n'.join(paras))
print('\n\n'.join(chapters))
