/* @generated from sdk/abi (tessera-plugin-abi) by `cargo run -p tessera-conformance --bin tessera-sdk-consts`; do not edit. */
#ifndef TESSERA_ABI_H
#define TESSERA_ABI_H

#include <stdint.h>

#define TP_ABI_VERSION (1)

#define TP_ACTION_PASS (0)
#define TP_ACTION_DENY (1)
#define TP_ACTION_REPLY (2)
#define TP_ACTION_REWRITE (3)
#define TP_ACTION_OBSERVE (4)

#define TP_REPLY_ACTION_PASS (0)
#define TP_REPLY_ACTION_REPLACE (1)
#define TP_REPLY_ACTION_ERROR (2)

#define TP_INIT_OK (0)
#define TP_INIT_ERROR (1)

#define TP_MERGE_PLUGIN (0)
#define TP_MERGE_CONCAT (1)
#define TP_MERGE_SUM (2)
#define TP_MERGE_ALL_OK (3)
#define TP_MERGE_FIRST_NON_NIL (4)
#define TP_MERGE_LAST (5)
#define TP_MERGE_FIRST (6)

#define TP_STATUS_NOT_FOUND (-1)
#define TP_STATUS_BAD_ARGUMENT (-2)
#define TP_STATUS_BUFFER_TOO_SMALL (-3)
#define TP_STATUS_INVALID_MEMORY (-6)
#define TP_STATUS_NOT_ALLOWED (-10)
#define TP_STATUS_UNIMPLEMENTED (-12)

#define TP_LEVEL_TRACE (0)
#define TP_LEVEL_DEBUG (1)
#define TP_LEVEL_INFO (2)
#define TP_LEVEL_WARN (3)
#define TP_LEVEL_ERROR (4)

#define TP_METRIC_COUNTER (0)
#define TP_METRIC_GAUGE (1)
#define TP_METRIC_HISTOGRAM (2)

#define TP_LAYOUT_ARENA_SIZE (16)
#define TP_LAYOUT_CMD_HEADER (16)
#define TP_LAYOUT_ARG_ENTRY (8)
#define TP_LAYOUT_ARG_KEY (2147483648u)
#define TP_LAYOUT_ARG_ELIDED (1073741824)
#define TP_LAYOUT_ARG_REF (2147483648u)
#define TP_LAYOUT_LEN_MASK (1073741823)
#define TP_LAYOUT_CMD_VALUES_ELIDED (1)
#define TP_LAYOUT_REPLIES_HEADER (8)
#define TP_LAYOUT_REPLIES_HEADS (1)
#define TP_LAYOUT_REWRITE_HEADER (16)
#define TP_LAYOUT_MANIFEST_HEADER (24)
#define TP_LAYOUT_BATCH_HEADER (8)
#define TP_LAYOUT_BATCH_ENTRY (16)
#define TP_LAYOUT_BATCH_RESULT (8)
#define TP_LAYOUT_BATCH_DONE (4)

#define TP_MF_WANT_CLOSE (1)
#define TP_MF_ALL (2)
#define TP_MF_CLASS_VALUES (4)
#define TP_MF_DENIES (8)
#define TP_MF_OBSERVE_HEADS (16)
#define TP_MF_GATE (32)

#define TP_HOOK_VALUES (1)

#define TP_DENIED_MAX_NAMES (512)
#define TP_DENIED_MAX_NAME_LEN (64)

#define TP_GATE_MAX_PREFIXES (256)
#define TP_GATE_MAX_PREFIX_LEN (1024)

#define TP_CLIENT_INFO_HAS_USER (1)
#define TP_CLIENT_INFO_HAS_NAME (2)

/* Command classes (bit per class). */
#define TP_CLASS_READ (1u)
#define TP_CLASS_WRITE (2u)
#define TP_CLASS_ADMIN (4u)
#define TP_CLASS_PUBSUB (8u)
#define TP_CLASS_BLOCKING (16u)
#define TP_CLASS_SCRIPTING (32u)
#define TP_CLASS_TRANSACTION (64u)
#define TP_CLASS_CONNECTION (128u)
#define TP_CLASS_KEYLESS (256u)
#define TP_CLASS_MULTI_KEY (512u)
#define TP_CLASS_FAST (1024u)
#define TP_CLASS_DANGEROUS (2048u)

/* Class names as configs spell them, and their bits; TP_CLASS_COUNT entries. */
#define TP_CLASS_COUNT 12
static const struct { const char *name; uint32_t bit; } TP_CLASS_NAMES[] = {
    {"read", TP_CLASS_READ},
    {"write", TP_CLASS_WRITE},
    {"admin", TP_CLASS_ADMIN},
    {"pubsub", TP_CLASS_PUBSUB},
    {"blocking", TP_CLASS_BLOCKING},
    {"scripting", TP_CLASS_SCRIPTING},
    {"transaction", TP_CLASS_TRANSACTION},
    {"connection", TP_CLASS_CONNECTION},
    {"keyless", TP_CLASS_KEYLESS},
    {"multi-key", TP_CLASS_MULTI_KEY},
    {"fast", TP_CLASS_FAST},
    {"dangerous", TP_CLASS_DANGEROUS},
};

/* ABI command ids: index into the byte-sorted Redis 7.0 names, 1-based. */
#define TP_CMD_ACL 1
#define TP_CMD_APPEND 2
#define TP_CMD_ASKING 3
#define TP_CMD_AUTH 4
#define TP_CMD_BGREWRITEAOF 5
#define TP_CMD_BGSAVE 6
#define TP_CMD_BITCOUNT 7
#define TP_CMD_BITFIELD 8
#define TP_CMD_BITFIELD_RO 9
#define TP_CMD_BITOP 10
#define TP_CMD_BITPOS 11
#define TP_CMD_BLMOVE 12
#define TP_CMD_BLMPOP 13
#define TP_CMD_BLPOP 14
#define TP_CMD_BRPOP 15
#define TP_CMD_BRPOPLPUSH 16
#define TP_CMD_BZMPOP 17
#define TP_CMD_BZPOPMAX 18
#define TP_CMD_BZPOPMIN 19
#define TP_CMD_CLIENT 20
#define TP_CMD_CLUSTER 21
#define TP_CMD_COMMAND 22
#define TP_CMD_CONFIG 23
#define TP_CMD_COPY 24
#define TP_CMD_DBSIZE 25
#define TP_CMD_DEBUG 26
#define TP_CMD_DECR 27
#define TP_CMD_DECRBY 28
#define TP_CMD_DEL 29
#define TP_CMD_DISCARD 30
#define TP_CMD_DUMP 31
#define TP_CMD_ECHO 32
#define TP_CMD_EVAL 33
#define TP_CMD_EVALSHA 34
#define TP_CMD_EVALSHA_RO 35
#define TP_CMD_EVAL_RO 36
#define TP_CMD_EXEC 37
#define TP_CMD_EXISTS 38
#define TP_CMD_EXPIRE 39
#define TP_CMD_EXPIREAT 40
#define TP_CMD_EXPIRETIME 41
#define TP_CMD_FAILOVER 42
#define TP_CMD_FCALL 43
#define TP_CMD_FCALL_RO 44
#define TP_CMD_FLUSHALL 45
#define TP_CMD_FLUSHDB 46
#define TP_CMD_FUNCTION 47
#define TP_CMD_GEOADD 48
#define TP_CMD_GEODIST 49
#define TP_CMD_GEOHASH 50
#define TP_CMD_GEOPOS 51
#define TP_CMD_GEORADIUS 52
#define TP_CMD_GEORADIUSBYMEMBER 53
#define TP_CMD_GEORADIUSBYMEMBER_RO 54
#define TP_CMD_GEORADIUS_RO 55
#define TP_CMD_GEOSEARCH 56
#define TP_CMD_GEOSEARCHSTORE 57
#define TP_CMD_GET 58
#define TP_CMD_GETBIT 59
#define TP_CMD_GETDEL 60
#define TP_CMD_GETEX 61
#define TP_CMD_GETRANGE 62
#define TP_CMD_GETSET 63
#define TP_CMD_HDEL 64
#define TP_CMD_HELLO 65
#define TP_CMD_HEXISTS 66
#define TP_CMD_HGET 67
#define TP_CMD_HGETALL 68
#define TP_CMD_HINCRBY 69
#define TP_CMD_HINCRBYFLOAT 70
#define TP_CMD_HKEYS 71
#define TP_CMD_HLEN 72
#define TP_CMD_HMGET 73
#define TP_CMD_HMSET 74
#define TP_CMD_HRANDFIELD 75
#define TP_CMD_HSCAN 76
#define TP_CMD_HSET 77
#define TP_CMD_HSETNX 78
#define TP_CMD_HSTRLEN 79
#define TP_CMD_HVALS 80
#define TP_CMD_INCR 81
#define TP_CMD_INCRBY 82
#define TP_CMD_INCRBYFLOAT 83
#define TP_CMD_INFO 84
#define TP_CMD_KEYS 85
#define TP_CMD_LASTSAVE 86
#define TP_CMD_LATENCY 87
#define TP_CMD_LCS 88
#define TP_CMD_LINDEX 89
#define TP_CMD_LINSERT 90
#define TP_CMD_LLEN 91
#define TP_CMD_LMOVE 92
#define TP_CMD_LMPOP 93
#define TP_CMD_LOLWUT 94
#define TP_CMD_LPOP 95
#define TP_CMD_LPOS 96
#define TP_CMD_LPUSH 97
#define TP_CMD_LPUSHX 98
#define TP_CMD_LRANGE 99
#define TP_CMD_LREM 100
#define TP_CMD_LSET 101
#define TP_CMD_LTRIM 102
#define TP_CMD_MEMORY 103
#define TP_CMD_MGET 104
#define TP_CMD_MIGRATE 105
#define TP_CMD_MODULE 106
#define TP_CMD_MONITOR 107
#define TP_CMD_MOVE 108
#define TP_CMD_MSET 109
#define TP_CMD_MSETNX 110
#define TP_CMD_MULTI 111
#define TP_CMD_OBJECT 112
#define TP_CMD_PERSIST 113
#define TP_CMD_PEXPIRE 114
#define TP_CMD_PEXPIREAT 115
#define TP_CMD_PEXPIRETIME 116
#define TP_CMD_PFADD 117
#define TP_CMD_PFCOUNT 118
#define TP_CMD_PFDEBUG 119
#define TP_CMD_PFMERGE 120
#define TP_CMD_PFSELFTEST 121
#define TP_CMD_PING 122
#define TP_CMD_PSETEX 123
#define TP_CMD_PSUBSCRIBE 124
#define TP_CMD_PSYNC 125
#define TP_CMD_PTTL 126
#define TP_CMD_PUBLISH 127
#define TP_CMD_PUBSUB 128
#define TP_CMD_PUNSUBSCRIBE 129
#define TP_CMD_QUIT 130
#define TP_CMD_RANDOMKEY 131
#define TP_CMD_READONLY 132
#define TP_CMD_READWRITE 133
#define TP_CMD_RENAME 134
#define TP_CMD_RENAMENX 135
#define TP_CMD_REPLCONF 136
#define TP_CMD_REPLICAOF 137
#define TP_CMD_RESET 138
#define TP_CMD_RESTORE 139
#define TP_CMD_RESTORE_ASKING 140
#define TP_CMD_ROLE 141
#define TP_CMD_RPOP 142
#define TP_CMD_RPOPLPUSH 143
#define TP_CMD_RPUSH 144
#define TP_CMD_RPUSHX 145
#define TP_CMD_SADD 146
#define TP_CMD_SAVE 147
#define TP_CMD_SCAN 148
#define TP_CMD_SCARD 149
#define TP_CMD_SCRIPT 150
#define TP_CMD_SDIFF 151
#define TP_CMD_SDIFFSTORE 152
#define TP_CMD_SELECT 153
#define TP_CMD_SET 154
#define TP_CMD_SETBIT 155
#define TP_CMD_SETEX 156
#define TP_CMD_SETNX 157
#define TP_CMD_SETRANGE 158
#define TP_CMD_SHUTDOWN 159
#define TP_CMD_SINTER 160
#define TP_CMD_SINTERCARD 161
#define TP_CMD_SINTERSTORE 162
#define TP_CMD_SISMEMBER 163
#define TP_CMD_SLAVEOF 164
#define TP_CMD_SLOWLOG 165
#define TP_CMD_SMEMBERS 166
#define TP_CMD_SMISMEMBER 167
#define TP_CMD_SMOVE 168
#define TP_CMD_SORT 169
#define TP_CMD_SORT_RO 170
#define TP_CMD_SPOP 171
#define TP_CMD_SPUBLISH 172
#define TP_CMD_SRANDMEMBER 173
#define TP_CMD_SREM 174
#define TP_CMD_SSCAN 175
#define TP_CMD_SSUBSCRIBE 176
#define TP_CMD_STRLEN 177
#define TP_CMD_SUBSCRIBE 178
#define TP_CMD_SUBSTR 179
#define TP_CMD_SUNION 180
#define TP_CMD_SUNIONSTORE 181
#define TP_CMD_SUNSUBSCRIBE 182
#define TP_CMD_SWAPDB 183
#define TP_CMD_SYNC 184
#define TP_CMD_TIME 185
#define TP_CMD_TOUCH 186
#define TP_CMD_TTL 187
#define TP_CMD_TYPE 188
#define TP_CMD_UNLINK 189
#define TP_CMD_UNSUBSCRIBE 190
#define TP_CMD_UNWATCH 191
#define TP_CMD_WAIT 192
#define TP_CMD_WATCH 193
#define TP_CMD_XACK 194
#define TP_CMD_XADD 195
#define TP_CMD_XAUTOCLAIM 196
#define TP_CMD_XCLAIM 197
#define TP_CMD_XDEL 198
#define TP_CMD_XGROUP 199
#define TP_CMD_XINFO 200
#define TP_CMD_XLEN 201
#define TP_CMD_XPENDING 202
#define TP_CMD_XRANGE 203
#define TP_CMD_XREAD 204
#define TP_CMD_XREADGROUP 205
#define TP_CMD_XREVRANGE 206
#define TP_CMD_XSETID 207
#define TP_CMD_XTRIM 208
#define TP_CMD_ZADD 209
#define TP_CMD_ZCARD 210
#define TP_CMD_ZCOUNT 211
#define TP_CMD_ZDIFF 212
#define TP_CMD_ZDIFFSTORE 213
#define TP_CMD_ZINCRBY 214
#define TP_CMD_ZINTER 215
#define TP_CMD_ZINTERCARD 216
#define TP_CMD_ZINTERSTORE 217
#define TP_CMD_ZLEXCOUNT 218
#define TP_CMD_ZMPOP 219
#define TP_CMD_ZMSCORE 220
#define TP_CMD_ZPOPMAX 221
#define TP_CMD_ZPOPMIN 222
#define TP_CMD_ZRANDMEMBER 223
#define TP_CMD_ZRANGE 224
#define TP_CMD_ZRANGEBYLEX 225
#define TP_CMD_ZRANGEBYSCORE 226
#define TP_CMD_ZRANGESTORE 227
#define TP_CMD_ZRANK 228
#define TP_CMD_ZREM 229
#define TP_CMD_ZREMRANGEBYLEX 230
#define TP_CMD_ZREMRANGEBYRANK 231
#define TP_CMD_ZREMRANGEBYSCORE 232
#define TP_CMD_ZREVRANGE 233
#define TP_CMD_ZREVRANGEBYLEX 234
#define TP_CMD_ZREVRANGEBYSCORE 235
#define TP_CMD_ZREVRANK 236
#define TP_CMD_ZSCAN 237
#define TP_CMD_ZSCORE 238
#define TP_CMD_ZUNION 239
#define TP_CMD_ZUNIONSTORE 240

/* Names by id (index 0 is "": unknown); TP_CMD_COUNT entries. */
#define TP_CMD_COUNT 241
static const char *const TP_COMMAND_NAMES[] = {
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
};

#endif
