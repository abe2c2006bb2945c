// @generated from host/model/src/command/generated.rs (the redis-server 7.0 command names, sorted
// by bytes) by tools/gen-abi-commands.py. The ids are part of ABI v1: never reorder; new
// commands get new ids at the end (and the lookup then falls back to a linear scan).

/// Command names by ABI command id; index 0 is "unknown command".
pub const COMMAND_NAMES: &[&str] = &[
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

/// ABI command ids as constants, for `match` in plugins.
pub mod cmd {
    pub const ACL: u16 = 1;
    pub const APPEND: u16 = 2;
    pub const ASKING: u16 = 3;
    pub const AUTH: u16 = 4;
    pub const BGREWRITEAOF: u16 = 5;
    pub const BGSAVE: u16 = 6;
    pub const BITCOUNT: u16 = 7;
    pub const BITFIELD: u16 = 8;
    pub const BITFIELD_RO: u16 = 9;
    pub const BITOP: u16 = 10;
    pub const BITPOS: u16 = 11;
    pub const BLMOVE: u16 = 12;
    pub const BLMPOP: u16 = 13;
    pub const BLPOP: u16 = 14;
    pub const BRPOP: u16 = 15;
    pub const BRPOPLPUSH: u16 = 16;
    pub const BZMPOP: u16 = 17;
    pub const BZPOPMAX: u16 = 18;
    pub const BZPOPMIN: u16 = 19;
    pub const CLIENT: u16 = 20;
    pub const CLUSTER: u16 = 21;
    pub const COMMAND: u16 = 22;
    pub const CONFIG: u16 = 23;
    pub const COPY: u16 = 24;
    pub const DBSIZE: u16 = 25;
    pub const DEBUG: u16 = 26;
    pub const DECR: u16 = 27;
    pub const DECRBY: u16 = 28;
    pub const DEL: u16 = 29;
    pub const DISCARD: u16 = 30;
    pub const DUMP: u16 = 31;
    pub const ECHO: u16 = 32;
    pub const EVAL: u16 = 33;
    pub const EVALSHA: u16 = 34;
    pub const EVALSHA_RO: u16 = 35;
    pub const EVAL_RO: u16 = 36;
    pub const EXEC: u16 = 37;
    pub const EXISTS: u16 = 38;
    pub const EXPIRE: u16 = 39;
    pub const EXPIREAT: u16 = 40;
    pub const EXPIRETIME: u16 = 41;
    pub const FAILOVER: u16 = 42;
    pub const FCALL: u16 = 43;
    pub const FCALL_RO: u16 = 44;
    pub const FLUSHALL: u16 = 45;
    pub const FLUSHDB: u16 = 46;
    pub const FUNCTION: u16 = 47;
    pub const GEOADD: u16 = 48;
    pub const GEODIST: u16 = 49;
    pub const GEOHASH: u16 = 50;
    pub const GEOPOS: u16 = 51;
    pub const GEORADIUS: u16 = 52;
    pub const GEORADIUSBYMEMBER: u16 = 53;
    pub const GEORADIUSBYMEMBER_RO: u16 = 54;
    pub const GEORADIUS_RO: u16 = 55;
    pub const GEOSEARCH: u16 = 56;
    pub const GEOSEARCHSTORE: u16 = 57;
    pub const GET: u16 = 58;
    pub const GETBIT: u16 = 59;
    pub const GETDEL: u16 = 60;
    pub const GETEX: u16 = 61;
    pub const GETRANGE: u16 = 62;
    pub const GETSET: u16 = 63;
    pub const HDEL: u16 = 64;
    pub const HELLO: u16 = 65;
    pub const HEXISTS: u16 = 66;
    pub const HGET: u16 = 67;
    pub const HGETALL: u16 = 68;
    pub const HINCRBY: u16 = 69;
    pub const HINCRBYFLOAT: u16 = 70;
    pub const HKEYS: u16 = 71;
    pub const HLEN: u16 = 72;
    pub const HMGET: u16 = 73;
    pub const HMSET: u16 = 74;
    pub const HRANDFIELD: u16 = 75;
    pub const HSCAN: u16 = 76;
    pub const HSET: u16 = 77;
    pub const HSETNX: u16 = 78;
    pub const HSTRLEN: u16 = 79;
    pub const HVALS: u16 = 80;
    pub const INCR: u16 = 81;
    pub const INCRBY: u16 = 82;
    pub const INCRBYFLOAT: u16 = 83;
    pub const INFO: u16 = 84;
    pub const KEYS: u16 = 85;
    pub const LASTSAVE: u16 = 86;
    pub const LATENCY: u16 = 87;
    pub const LCS: u16 = 88;
    pub const LINDEX: u16 = 89;
    pub const LINSERT: u16 = 90;
    pub const LLEN: u16 = 91;
    pub const LMOVE: u16 = 92;
    pub const LMPOP: u16 = 93;
    pub const LOLWUT: u16 = 94;
    pub const LPOP: u16 = 95;
    pub const LPOS: u16 = 96;
    pub const LPUSH: u16 = 97;
    pub const LPUSHX: u16 = 98;
    pub const LRANGE: u16 = 99;
    pub const LREM: u16 = 100;
    pub const LSET: u16 = 101;
    pub const LTRIM: u16 = 102;
    pub const MEMORY: u16 = 103;
    pub const MGET: u16 = 104;
    pub const MIGRATE: u16 = 105;
    pub const MODULE: u16 = 106;
    pub const MONITOR: u16 = 107;
    pub const MOVE: u16 = 108;
    pub const MSET: u16 = 109;
    pub const MSETNX: u16 = 110;
    pub const MULTI: u16 = 111;
    pub const OBJECT: u16 = 112;
    pub const PERSIST: u16 = 113;
    pub const PEXPIRE: u16 = 114;
    pub const PEXPIREAT: u16 = 115;
    pub const PEXPIRETIME: u16 = 116;
    pub const PFADD: u16 = 117;
    pub const PFCOUNT: u16 = 118;
    pub const PFDEBUG: u16 = 119;
    pub const PFMERGE: u16 = 120;
    pub const PFSELFTEST: u16 = 121;
    pub const PING: u16 = 122;
    pub const PSETEX: u16 = 123;
    pub const PSUBSCRIBE: u16 = 124;
    pub const PSYNC: u16 = 125;
    pub const PTTL: u16 = 126;
    pub const PUBLISH: u16 = 127;
    pub const PUBSUB: u16 = 128;
    pub const PUNSUBSCRIBE: u16 = 129;
    pub const QUIT: u16 = 130;
    pub const RANDOMKEY: u16 = 131;
    pub const READONLY: u16 = 132;
    pub const READWRITE: u16 = 133;
    pub const RENAME: u16 = 134;
    pub const RENAMENX: u16 = 135;
    pub const REPLCONF: u16 = 136;
    pub const REPLICAOF: u16 = 137;
    pub const RESET: u16 = 138;
    pub const RESTORE: u16 = 139;
    pub const RESTORE_ASKING: u16 = 140;
    pub const ROLE: u16 = 141;
    pub const RPOP: u16 = 142;
    pub const RPOPLPUSH: u16 = 143;
    pub const RPUSH: u16 = 144;
    pub const RPUSHX: u16 = 145;
    pub const SADD: u16 = 146;
    pub const SAVE: u16 = 147;
    pub const SCAN: u16 = 148;
    pub const SCARD: u16 = 149;
    pub const SCRIPT: u16 = 150;
    pub const SDIFF: u16 = 151;
    pub const SDIFFSTORE: u16 = 152;
    pub const SELECT: u16 = 153;
    pub const SET: u16 = 154;
    pub const SETBIT: u16 = 155;
    pub const SETEX: u16 = 156;
    pub const SETNX: u16 = 157;
    pub const SETRANGE: u16 = 158;
    pub const SHUTDOWN: u16 = 159;
    pub const SINTER: u16 = 160;
    pub const SINTERCARD: u16 = 161;
    pub const SINTERSTORE: u16 = 162;
    pub const SISMEMBER: u16 = 163;
    pub const SLAVEOF: u16 = 164;
    pub const SLOWLOG: u16 = 165;
    pub const SMEMBERS: u16 = 166;
    pub const SMISMEMBER: u16 = 167;
    pub const SMOVE: u16 = 168;
    pub const SORT: u16 = 169;
    pub const SORT_RO: u16 = 170;
    pub const SPOP: u16 = 171;
    pub const SPUBLISH: u16 = 172;
    pub const SRANDMEMBER: u16 = 173;
    pub const SREM: u16 = 174;
    pub const SSCAN: u16 = 175;
    pub const SSUBSCRIBE: u16 = 176;
    pub const STRLEN: u16 = 177;
    pub const SUBSCRIBE: u16 = 178;
    pub const SUBSTR: u16 = 179;
    pub const SUNION: u16 = 180;
    pub const SUNIONSTORE: u16 = 181;
    pub const SUNSUBSCRIBE: u16 = 182;
    pub const SWAPDB: u16 = 183;
    pub const SYNC: u16 = 184;
    pub const TIME: u16 = 185;
    pub const TOUCH: u16 = 186;
    pub const TTL: u16 = 187;
    pub const TYPE: u16 = 188;
    pub const UNLINK: u16 = 189;
    pub const UNSUBSCRIBE: u16 = 190;
    pub const UNWATCH: u16 = 191;
    pub const WAIT: u16 = 192;
    pub const WATCH: u16 = 193;
    pub const XACK: u16 = 194;
    pub const XADD: u16 = 195;
    pub const XAUTOCLAIM: u16 = 196;
    pub const XCLAIM: u16 = 197;
    pub const XDEL: u16 = 198;
    pub const XGROUP: u16 = 199;
    pub const XINFO: u16 = 200;
    pub const XLEN: u16 = 201;
    pub const XPENDING: u16 = 202;
    pub const XRANGE: u16 = 203;
    pub const XREAD: u16 = 204;
    pub const XREADGROUP: u16 = 205;
    pub const XREVRANGE: u16 = 206;
    pub const XSETID: u16 = 207;
    pub const XTRIM: u16 = 208;
    pub const ZADD: u16 = 209;
    pub const ZCARD: u16 = 210;
    pub const ZCOUNT: u16 = 211;
    pub const ZDIFF: u16 = 212;
    pub const ZDIFFSTORE: u16 = 213;
    pub const ZINCRBY: u16 = 214;
    pub const ZINTER: u16 = 215;
    pub const ZINTERCARD: u16 = 216;
    pub const ZINTERSTORE: u16 = 217;
    pub const ZLEXCOUNT: u16 = 218;
    pub const ZMPOP: u16 = 219;
    pub const ZMSCORE: u16 = 220;
    pub const ZPOPMAX: u16 = 221;
    pub const ZPOPMIN: u16 = 222;
    pub const ZRANDMEMBER: u16 = 223;
    pub const ZRANGE: u16 = 224;
    pub const ZRANGEBYLEX: u16 = 225;
    pub const ZRANGEBYSCORE: u16 = 226;
    pub const ZRANGESTORE: u16 = 227;
    pub const ZRANK: u16 = 228;
    pub const ZREM: u16 = 229;
    pub const ZREMRANGEBYLEX: u16 = 230;
    pub const ZREMRANGEBYRANK: u16 = 231;
    pub const ZREMRANGEBYSCORE: u16 = 232;
    pub const ZREVRANGE: u16 = 233;
    pub const ZREVRANGEBYLEX: u16 = 234;
    pub const ZREVRANGEBYSCORE: u16 = 235;
    pub const ZREVRANK: u16 = 236;
    pub const ZSCAN: u16 = 237;
    pub const ZSCORE: u16 = 238;
    pub const ZUNION: u16 = 239;
    pub const ZUNIONSTORE: u16 = 240;
}
