// @generated from sdk/abi (tessera-plugin-abi) by `cargo run -p tessera-conformance --bin tessera-sdk-consts`; do not edit.

export namespace abi {
  export const VERSION: i32 = 1;
}

export namespace action {
  export const PASS: i32 = 0;
  export const DENY: i32 = 1;
  export const REPLY: i32 = 2;
  export const REWRITE: i32 = 3;
  export const OBSERVE: i32 = 4;
}

export namespace reply_action {
  export const PASS: i32 = 0;
  export const REPLACE: i32 = 1;
  export const ERROR: i32 = 2;
}

export namespace init {
  export const OK: i32 = 0;
  export const ERROR: i32 = 1;
}

export namespace merge {
  export const PLUGIN: i32 = 0;
  export const CONCAT: i32 = 1;
  export const SUM: i32 = 2;
  export const ALL_OK: i32 = 3;
  export const FIRST_NON_NIL: i32 = 4;
  export const LAST: i32 = 5;
  export const FIRST: i32 = 6;
}

export namespace status {
  export const NOT_FOUND: i64 = -1;
  export const BAD_ARGUMENT: i64 = -2;
  export const BUFFER_TOO_SMALL: i64 = -3;
  export const INVALID_MEMORY: i64 = -6;
  export const NOT_ALLOWED: i64 = -10;
  export const UNIMPLEMENTED: i64 = -12;
}

export namespace level {
  export const TRACE: i32 = 0;
  export const DEBUG: i32 = 1;
  export const INFO: i32 = 2;
  export const WARN: i32 = 3;
  export const ERROR: i32 = 4;
}

export namespace metric {
  export const COUNTER: i32 = 0;
  export const GAUGE: i32 = 1;
  export const HISTOGRAM: i32 = 2;
}

export namespace layout {
  export const ARENA_SIZE: u32 = 16;
  export const CMD_HEADER: u32 = 16;
  export const ARG_ENTRY: u32 = 8;
  export const ARG_KEY: u32 = 2147483648;
  export const ARG_ELIDED: u32 = 1073741824;
  export const ARG_REF: u32 = 2147483648;
  export const LEN_MASK: u32 = 1073741823;
  export const CMD_VALUES_ELIDED: u32 = 1;
  export const REPLIES_HEADER: u32 = 8;
  export const REPLIES_HEADS: u32 = 1;
  export const REWRITE_HEADER: u32 = 16;
  export const MANIFEST_HEADER: u32 = 24;
  export const BATCH_HEADER: u32 = 8;
  export const BATCH_ENTRY: u32 = 16;
  export const BATCH_RESULT: u32 = 8;
  export const BATCH_DONE: u32 = 4;
}

export namespace mf {
  export const WANT_CLOSE: u32 = 1;
  export const ALL: u32 = 2;
  export const CLASS_VALUES: u32 = 4;
  export const DENIES: u32 = 8;
  export const OBSERVE_HEADS: u32 = 16;
  export const GATE: u32 = 32;
}

export namespace hook {
  export const VALUES: u32 = 1;
}

export namespace denied {
  export const MAX_NAMES: u32 = 512;
  export const MAX_NAME_LEN: u32 = 64;
}

export namespace gate {
  export const MAX_PREFIXES: i32 = 256;
  export const MAX_PREFIX_LEN: i32 = 1024;
}

export namespace client_info {
  export const HAS_USER: u32 = 1;
  export const HAS_NAME: u32 = 2;
}

/** Command classes (bit per class). */
export namespace klass {
  export const READ: u32 = 1;
  export const WRITE: u32 = 2;
  export const ADMIN: u32 = 4;
  export const PUBSUB: u32 = 8;
  export const BLOCKING: u32 = 16;
  export const SCRIPTING: u32 = 32;
  export const TRANSACTION: u32 = 64;
  export const CONNECTION: u32 = 128;
  export const KEYLESS: u32 = 256;
  export const MULTI_KEY: u32 = 512;
  export const FAST: u32 = 1024;
  export const DANGEROUS: u32 = 2048;
}

/** Class names as configs spell them, in bit order. */
export const CLASS_NAMES: StaticArray<string> = [
  "read",
  "write",
  "admin",
  "pubsub",
  "blocking",
  "scripting",
  "transaction",
  "connection",
  "keyless",
  "multi-key",
  "fast",
  "dangerous",
];

/** ABI command ids: index into the byte-sorted Redis 7.0 names, 1-based. */
export namespace cmd {
  export const ACL: u16 = 1;
  export const APPEND: u16 = 2;
  export const ASKING: u16 = 3;
  export const AUTH: u16 = 4;
  export const BGREWRITEAOF: u16 = 5;
  export const BGSAVE: u16 = 6;
  export const BITCOUNT: u16 = 7;
  export const BITFIELD: u16 = 8;
  export const BITFIELD_RO: u16 = 9;
  export const BITOP: u16 = 10;
  export const BITPOS: u16 = 11;
  export const BLMOVE: u16 = 12;
  export const BLMPOP: u16 = 13;
  export const BLPOP: u16 = 14;
  export const BRPOP: u16 = 15;
  export const BRPOPLPUSH: u16 = 16;
  export const BZMPOP: u16 = 17;
  export const BZPOPMAX: u16 = 18;
  export const BZPOPMIN: u16 = 19;
  export const CLIENT: u16 = 20;
  export const CLUSTER: u16 = 21;
  export const COMMAND: u16 = 22;
  export const CONFIG: u16 = 23;
  export const COPY: u16 = 24;
  export const DBSIZE: u16 = 25;
  export const DEBUG: u16 = 26;
  export const DECR: u16 = 27;
  export const DECRBY: u16 = 28;
  export const DEL: u16 = 29;
  export const DISCARD: u16 = 30;
  export const DUMP: u16 = 31;
  export const ECHO: u16 = 32;
  export const EVAL: u16 = 33;
  export const EVALSHA: u16 = 34;
  export const EVALSHA_RO: u16 = 35;
  export const EVAL_RO: u16 = 36;
  export const EXEC: u16 = 37;
  export const EXISTS: u16 = 38;
  export const EXPIRE: u16 = 39;
  export const EXPIREAT: u16 = 40;
  export const EXPIRETIME: u16 = 41;
  export const FAILOVER: u16 = 42;
  export const FCALL: u16 = 43;
  export const FCALL_RO: u16 = 44;
  export const FLUSHALL: u16 = 45;
  export const FLUSHDB: u16 = 46;
  export const FUNCTION: u16 = 47;
  export const GEOADD: u16 = 48;
  export const GEODIST: u16 = 49;
  export const GEOHASH: u16 = 50;
  export const GEOPOS: u16 = 51;
  export const GEORADIUS: u16 = 52;
  export const GEORADIUSBYMEMBER: u16 = 53;
  export const GEORADIUSBYMEMBER_RO: u16 = 54;
  export const GEORADIUS_RO: u16 = 55;
  export const GEOSEARCH: u16 = 56;
  export const GEOSEARCHSTORE: u16 = 57;
  export const GET: u16 = 58;
  export const GETBIT: u16 = 59;
  export const GETDEL: u16 = 60;
  export const GETEX: u16 = 61;
  export const GETRANGE: u16 = 62;
  export const GETSET: u16 = 63;
  export const HDEL: u16 = 64;
  export const HELLO: u16 = 65;
  export const HEXISTS: u16 = 66;
  export const HGET: u16 = 67;
  export const HGETALL: u16 = 68;
  export const HINCRBY: u16 = 69;
  export const HINCRBYFLOAT: u16 = 70;
  export const HKEYS: u16 = 71;
  export const HLEN: u16 = 72;
  export const HMGET: u16 = 73;
  export const HMSET: u16 = 74;
  export const HRANDFIELD: u16 = 75;
  export const HSCAN: u16 = 76;
  export const HSET: u16 = 77;
  export const HSETNX: u16 = 78;
  export const HSTRLEN: u16 = 79;
  export const HVALS: u16 = 80;
  export const INCR: u16 = 81;
  export const INCRBY: u16 = 82;
  export const INCRBYFLOAT: u16 = 83;
  export const INFO: u16 = 84;
  export const KEYS: u16 = 85;
  export const LASTSAVE: u16 = 86;
  export const LATENCY: u16 = 87;
  export const LCS: u16 = 88;
  export const LINDEX: u16 = 89;
  export const LINSERT: u16 = 90;
  export const LLEN: u16 = 91;
  export const LMOVE: u16 = 92;
  export const LMPOP: u16 = 93;
  export const LOLWUT: u16 = 94;
  export const LPOP: u16 = 95;
  export const LPOS: u16 = 96;
  export const LPUSH: u16 = 97;
  export const LPUSHX: u16 = 98;
  export const LRANGE: u16 = 99;
  export const LREM: u16 = 100;
  export const LSET: u16 = 101;
  export const LTRIM: u16 = 102;
  export const MEMORY: u16 = 103;
  export const MGET: u16 = 104;
  export const MIGRATE: u16 = 105;
  export const MODULE: u16 = 106;
  export const MONITOR: u16 = 107;
  export const MOVE: u16 = 108;
  export const MSET: u16 = 109;
  export const MSETNX: u16 = 110;
  export const MULTI: u16 = 111;
  export const OBJECT: u16 = 112;
  export const PERSIST: u16 = 113;
  export const PEXPIRE: u16 = 114;
  export const PEXPIREAT: u16 = 115;
  export const PEXPIRETIME: u16 = 116;
  export const PFADD: u16 = 117;
  export const PFCOUNT: u16 = 118;
  export const PFDEBUG: u16 = 119;
  export const PFMERGE: u16 = 120;
  export const PFSELFTEST: u16 = 121;
  export const PING: u16 = 122;
  export const PSETEX: u16 = 123;
  export const PSUBSCRIBE: u16 = 124;
  export const PSYNC: u16 = 125;
  export const PTTL: u16 = 126;
  export const PUBLISH: u16 = 127;
  export const PUBSUB: u16 = 128;
  export const PUNSUBSCRIBE: u16 = 129;
  export const QUIT: u16 = 130;
  export const RANDOMKEY: u16 = 131;
  export const READONLY: u16 = 132;
  export const READWRITE: u16 = 133;
  export const RENAME: u16 = 134;
  export const RENAMENX: u16 = 135;
  export const REPLCONF: u16 = 136;
  export const REPLICAOF: u16 = 137;
  export const RESET: u16 = 138;
  export const RESTORE: u16 = 139;
  export const RESTORE_ASKING: u16 = 140;
  export const ROLE: u16 = 141;
  export const RPOP: u16 = 142;
  export const RPOPLPUSH: u16 = 143;
  export const RPUSH: u16 = 144;
  export const RPUSHX: u16 = 145;
  export const SADD: u16 = 146;
  export const SAVE: u16 = 147;
  export const SCAN: u16 = 148;
  export const SCARD: u16 = 149;
  export const SCRIPT: u16 = 150;
  export const SDIFF: u16 = 151;
  export const SDIFFSTORE: u16 = 152;
  export const SELECT: u16 = 153;
  export const SET: u16 = 154;
  export const SETBIT: u16 = 155;
  export const SETEX: u16 = 156;
  export const SETNX: u16 = 157;
  export const SETRANGE: u16 = 158;
  export const SHUTDOWN: u16 = 159;
  export const SINTER: u16 = 160;
  export const SINTERCARD: u16 = 161;
  export const SINTERSTORE: u16 = 162;
  export const SISMEMBER: u16 = 163;
  export const SLAVEOF: u16 = 164;
  export const SLOWLOG: u16 = 165;
  export const SMEMBERS: u16 = 166;
  export const SMISMEMBER: u16 = 167;
  export const SMOVE: u16 = 168;
  export const SORT: u16 = 169;
  export const SORT_RO: u16 = 170;
  export const SPOP: u16 = 171;
  export const SPUBLISH: u16 = 172;
  export const SRANDMEMBER: u16 = 173;
  export const SREM: u16 = 174;
  export const SSCAN: u16 = 175;
  export const SSUBSCRIBE: u16 = 176;
  export const STRLEN: u16 = 177;
  export const SUBSCRIBE: u16 = 178;
  export const SUBSTR: u16 = 179;
  export const SUNION: u16 = 180;
  export const SUNIONSTORE: u16 = 181;
  export const SUNSUBSCRIBE: u16 = 182;
  export const SWAPDB: u16 = 183;
  export const SYNC: u16 = 184;
  export const TIME: u16 = 185;
  export const TOUCH: u16 = 186;
  export const TTL: u16 = 187;
  export const TYPE: u16 = 188;
  export const UNLINK: u16 = 189;
  export const UNSUBSCRIBE: u16 = 190;
  export const UNWATCH: u16 = 191;
  export const WAIT: u16 = 192;
  export const WATCH: u16 = 193;
  export const XACK: u16 = 194;
  export const XADD: u16 = 195;
  export const XAUTOCLAIM: u16 = 196;
  export const XCLAIM: u16 = 197;
  export const XDEL: u16 = 198;
  export const XGROUP: u16 = 199;
  export const XINFO: u16 = 200;
  export const XLEN: u16 = 201;
  export const XPENDING: u16 = 202;
  export const XRANGE: u16 = 203;
  export const XREAD: u16 = 204;
  export const XREADGROUP: u16 = 205;
  export const XREVRANGE: u16 = 206;
  export const XSETID: u16 = 207;
  export const XTRIM: u16 = 208;
  export const ZADD: u16 = 209;
  export const ZCARD: u16 = 210;
  export const ZCOUNT: u16 = 211;
  export const ZDIFF: u16 = 212;
  export const ZDIFFSTORE: u16 = 213;
  export const ZINCRBY: u16 = 214;
  export const ZINTER: u16 = 215;
  export const ZINTERCARD: u16 = 216;
  export const ZINTERSTORE: u16 = 217;
  export const ZLEXCOUNT: u16 = 218;
  export const ZMPOP: u16 = 219;
  export const ZMSCORE: u16 = 220;
  export const ZPOPMAX: u16 = 221;
  export const ZPOPMIN: u16 = 222;
  export const ZRANDMEMBER: u16 = 223;
  export const ZRANGE: u16 = 224;
  export const ZRANGEBYLEX: u16 = 225;
  export const ZRANGEBYSCORE: u16 = 226;
  export const ZRANGESTORE: u16 = 227;
  export const ZRANK: u16 = 228;
  export const ZREM: u16 = 229;
  export const ZREMRANGEBYLEX: u16 = 230;
  export const ZREMRANGEBYRANK: u16 = 231;
  export const ZREMRANGEBYSCORE: u16 = 232;
  export const ZREVRANGE: u16 = 233;
  export const ZREVRANGEBYLEX: u16 = 234;
  export const ZREVRANGEBYSCORE: u16 = 235;
  export const ZREVRANK: u16 = 236;
  export const ZSCAN: u16 = 237;
  export const ZSCORE: u16 = 238;
  export const ZUNION: u16 = 239;
  export const ZUNIONSTORE: u16 = 240;
}

/** Names by id (index 0 is "": unknown). */
export const COMMAND_NAMES: StaticArray<string> = [
  "",
  "ACL",
  "APPEND",
  "ASKING",
  "AUTH",
  "BGREWRITEAOF",
  "BGSAVE",
  "BITCOUNT",
  "BITFIELD",
  "BITFIELD_RO",
  "BITOP",
  "BITPOS",
  "BLMOVE",
  "BLMPOP",
  "BLPOP",
  "BRPOP",
  "BRPOPLPUSH",
  "BZMPOP",
  "BZPOPMAX",
  "BZPOPMIN",
  "CLIENT",
  "CLUSTER",
  "COMMAND",
  "CONFIG",
  "COPY",
  "DBSIZE",
  "DEBUG",
  "DECR",
  "DECRBY",
  "DEL",
  "DISCARD",
  "DUMP",
  "ECHO",
  "EVAL",
  "EVALSHA",
  "EVALSHA_RO",
  "EVAL_RO",
  "EXEC",
  "EXISTS",
  "EXPIRE",
  "EXPIREAT",
  "EXPIRETIME",
  "FAILOVER",
  "FCALL",
  "FCALL_RO",
  "FLUSHALL",
  "FLUSHDB",
  "FUNCTION",
  "GEOADD",
  "GEODIST",
  "GEOHASH",
  "GEOPOS",
  "GEORADIUS",
  "GEORADIUSBYMEMBER",
  "GEORADIUSBYMEMBER_RO",
  "GEORADIUS_RO",
  "GEOSEARCH",
  "GEOSEARCHSTORE",
  "GET",
  "GETBIT",
  "GETDEL",
  "GETEX",
  "GETRANGE",
  "GETSET",
  "HDEL",
  "HELLO",
  "HEXISTS",
  "HGET",
  "HGETALL",
  "HINCRBY",
  "HINCRBYFLOAT",
  "HKEYS",
  "HLEN",
  "HMGET",
  "HMSET",
  "HRANDFIELD",
  "HSCAN",
  "HSET",
  "HSETNX",
  "HSTRLEN",
  "HVALS",
  "INCR",
  "INCRBY",
  "INCRBYFLOAT",
  "INFO",
  "KEYS",
  "LASTSAVE",
  "LATENCY",
  "LCS",
  "LINDEX",
  "LINSERT",
  "LLEN",
  "LMOVE",
  "LMPOP",
  "LOLWUT",
  "LPOP",
  "LPOS",
  "LPUSH",
  "LPUSHX",
  "LRANGE",
  "LREM",
  "LSET",
  "LTRIM",
  "MEMORY",
  "MGET",
  "MIGRATE",
  "MODULE",
  "MONITOR",
  "MOVE",
  "MSET",
  "MSETNX",
  "MULTI",
  "OBJECT",
  "PERSIST",
  "PEXPIRE",
  "PEXPIREAT",
  "PEXPIRETIME",
  "PFADD",
  "PFCOUNT",
  "PFDEBUG",
  "PFMERGE",
  "PFSELFTEST",
  "PING",
  "PSETEX",
  "PSUBSCRIBE",
  "PSYNC",
  "PTTL",
  "PUBLISH",
  "PUBSUB",
  "PUNSUBSCRIBE",
  "QUIT",
  "RANDOMKEY",
  "READONLY",
  "READWRITE",
  "RENAME",
  "RENAMENX",
  "REPLCONF",
  "REPLICAOF",
  "RESET",
  "RESTORE",
  "RESTORE-ASKING",
  "ROLE",
  "RPOP",
  "RPOPLPUSH",
  "RPUSH",
  "RPUSHX",
  "SADD",
  "SAVE",
  "SCAN",
  "SCARD",
  "SCRIPT",
  "SDIFF",
  "SDIFFSTORE",
  "SELECT",
  "SET",
  "SETBIT",
  "SETEX",
  "SETNX",
  "SETRANGE",
  "SHUTDOWN",
  "SINTER",
  "SINTERCARD",
  "SINTERSTORE",
  "SISMEMBER",
  "SLAVEOF",
  "SLOWLOG",
  "SMEMBERS",
  "SMISMEMBER",
  "SMOVE",
  "SORT",
  "SORT_RO",
  "SPOP",
  "SPUBLISH",
  "SRANDMEMBER",
  "SREM",
  "SSCAN",
  "SSUBSCRIBE",
  "STRLEN",
  "SUBSCRIBE",
  "SUBSTR",
  "SUNION",
  "SUNIONSTORE",
  "SUNSUBSCRIBE",
  "SWAPDB",
  "SYNC",
  "TIME",
  "TOUCH",
  "TTL",
  "TYPE",
  "UNLINK",
  "UNSUBSCRIBE",
  "UNWATCH",
  "WAIT",
  "WATCH",
  "XACK",
  "XADD",
  "XAUTOCLAIM",
  "XCLAIM",
  "XDEL",
  "XGROUP",
  "XINFO",
  "XLEN",
  "XPENDING",
  "XRANGE",
  "XREAD",
  "XREADGROUP",
  "XREVRANGE",
  "XSETID",
  "XTRIM",
  "ZADD",
  "ZCARD",
  "ZCOUNT",
  "ZDIFF",
  "ZDIFFSTORE",
  "ZINCRBY",
  "ZINTER",
  "ZINTERCARD",
  "ZINTERSTORE",
  "ZLEXCOUNT",
  "ZMPOP",
  "ZMSCORE",
  "ZPOPMAX",
  "ZPOPMIN",
  "ZRANDMEMBER",
  "ZRANGE",
  "ZRANGEBYLEX",
  "ZRANGEBYSCORE",
  "ZRANGESTORE",
  "ZRANK",
  "ZREM",
  "ZREMRANGEBYLEX",
  "ZREMRANGEBYRANK",
  "ZREMRANGEBYSCORE",
  "ZREVRANGE",
  "ZREVRANGEBYLEX",
  "ZREVRANGEBYSCORE",
  "ZREVRANK",
  "ZSCAN",
  "ZSCORE",
  "ZUNION",
  "ZUNIONSTORE",
];
