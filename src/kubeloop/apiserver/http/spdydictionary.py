"""SPDY/3's header compression dictionary (its specification's, section 2.6.10.1): the zlib
preset dictionary both sides of a SPDY/3 connection compress their header blocks with."""

from __future__ import annotations

#: 1,423 bytes; sha256 51d27341373f923f3cd88e1eb7162aeaa3723d7585ff2399201dc06498407f02.
DICTIONARY = (
    b'\x00\x00\x00\x07options\x00\x00\x00\x04head\x00\x00\x00\x04post\x00\x00\x00\x03put\x00\x00\x00\x06delete\x00\x00\x00\x05'
    b'trace\x00\x00\x00\x06accept\x00\x00\x00\x0eaccept-charset\x00\x00\x00\x0faccept-enco'
    b'ding\x00\x00\x00\x0faccept-language\x00\x00\x00\raccept-ranges\x00\x00\x00\x03age\x00'
    b'\x00\x00\x05allow\x00\x00\x00\rauthorization\x00\x00\x00\rcache-control\x00\x00\x00\nco'
    b'nnection\x00\x00\x00\x0ccontent-base\x00\x00\x00\x10content-encoding\x00\x00\x00\x10'
    b'content-language\x00\x00\x00\x0econtent-length\x00\x00\x00\x10content-lo'
    b'cation\x00\x00\x00\x0bcontent-md5\x00\x00\x00\rcontent-range\x00\x00\x00\x0cconten'
    b't-type\x00\x00\x00\x04date\x00\x00\x00\x04etag\x00\x00\x00\x06expect\x00\x00\x00\x07expires\x00\x00\x00\x04f'
    b'rom\x00\x00\x00\x04host\x00\x00\x00\x08if-match\x00\x00\x00\x11if-modified-since\x00\x00\x00\r'
    b'if-none-match\x00\x00\x00\x08if-range\x00\x00\x00\x13if-unmodified-since'
    b'\x00\x00\x00\rlast-modified\x00\x00\x00\x08location\x00\x00\x00\x0cmax-forwards\x00\x00\x00'
    b'\x06pragma\x00\x00\x00\x12proxy-authenticate\x00\x00\x00\x13proxy-authoriza'
    b'tion\x00\x00\x00\x05range\x00\x00\x00\x07referer\x00\x00\x00\x0bretry-after\x00\x00\x00\x06serve'
    b'r\x00\x00\x00\x02te\x00\x00\x00\x07trailer\x00\x00\x00\x11transfer-encoding\x00\x00\x00\x07upgra'
    b'de\x00\x00\x00\nuser-agent\x00\x00\x00\x04vary\x00\x00\x00\x03via\x00\x00\x00\x07warning\x00\x00\x00\x10ww'
    b'w-authenticate\x00\x00\x00\x06method\x00\x00\x00\x03get\x00\x00\x00\x06status\x00\x00\x00\x06200'
    b' OK\x00\x00\x00\x07version\x00\x00\x00\x08HTTP/1.1\x00\x00\x00\x03url\x00\x00\x00\x06public\x00\x00\x00\ns'
    b'et-cookie\x00\x00\x00\nkeep-alive\x00\x00\x00\x06origin100101201202205'
    b'206300302303304305306307402405406407408409410411'
    b'412413414415416417502504505203 Non-Authoritative'
    b' Information204 No Content301 Moved Permanently4'
    b'00 Bad Request401 Unauthorized403 Forbidden404 N'
    b'ot Found500 Internal Server Error501 Not Impleme'
    b'nted503 Service UnavailableJan Feb Mar Apr May J'
    b'un Jul Aug Sept Oct Nov Dec 00:00:00 Mon, Tue, W'
    b'ed, Thu, Fri, Sat, Sun, GMTchunked,text/html,ima'
    b'ge/png,image/jpg,image/gif,application/xml,appli'
    b'cation/xhtml+xml,text/plain,text/javascript,publ'
    b'icprivatemax-age=gzip,deflate,sdchcharset=utf-8c'
    b'harset=iso-8859-1,utf-,*,enq=0.'
)
