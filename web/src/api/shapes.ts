// The names the views give the API's answers, all taken from the generated types: a route's
// answer where a route answers it, so that a renamed schema in the document changes nothing
// here.

import type { components } from '../generated/api';
import type { Answer, ConsoleAnswer, RequestBody } from './contract';

type Schemas = components['schemas'];

// === the console's own routes (docs/console.md) ===

export type Session = ConsoleAnswer<'/auth/me', 'get'>;
/** What a dashboard token or a console user may do (docs/api.md, "Tokens and roles"). */
export type Role = Schemas['Role'];
/** An entry of GET /api/clusters; its overview is the dashboard's, checked as one. */
export type ClusterSummary = ConsoleAnswer<'/api/clusters', 'get'>[number];
/** A dashboard audit entry, with its cluster set by the console. */
export type AuditEntry = ConsoleAnswer<'/api/audit', 'get'>[number];
/** One entry of the console's login log; a run of alike events is one entry. */
export type LoginEvent = ConsoleAnswer<'/api/logins', 'get'>[number];

// === a cluster's dashboard (docs/api.md) ===

export type Overview = Answer<'/api/overview', 'get'>;
export type Stats = Answer<'/api/stats', 'get'>;
export type ProxyStats = Stats['proxies'][number];
export type Group = Answer<'/api/groups', 'get'>[number];
export type Server = Group['servers'][number];
export type Slot = Answer<'/api/slots', 'get'>[number];
export type Proxy = Answer<'/api/proxies', 'get'>[number];
export type MigrationStatus = Answer<'/api/migrations', 'get'>;
export type SlotProgress = MigrationStatus['slots'][number];
export type MigrationRun = NonNullable<MigrationStatus['run']>;
export type MigrationHold = MigrationStatus['holds'][number];
export type MigrationJob = Answer<'/api/migrations/history', 'get'>['jobs'][number];
export type RebalanceResult = Answer<'/api/rebalance', 'post'>;
export type RebalanceBy = NonNullable<RebalanceResult['by']>;
export type Move = RebalanceResult['moves'][number];
export type SlotStats = Answer<'/api/slots/stats', 'get'>;
export type HotKeys = Answer<'/api/hotkeys', 'get'>;
export type HotKey = HotKeys['by_ops'][number];
export type HotCacheFigures = NonNullable<HotKeys['hot_cache']>;
export type ReadPolicyView = Answer<'/api/read-policy', 'get'>;
export type ReadPolicy = ReadPolicyView['policy'];
export type ReadMode = ReadPolicy['mode'];
export type Plugin = Answer<'/api/plugins', 'get'>[number];
export type History = Answer<'/api/history', 'get'>;
export type SeriesList = Answer<'/api/history/series', 'get'>;
export type HistorySeriesInfo = SeriesList['series'][number];
export type EventsPage = Answer<'/api/events', 'get'>;
export type ClusterEvent = EventsPage['events'][number];
export type PluginMetrics = Answer<'/api/plugins/{name}/metrics', 'get'>;
export type PluginSample = PluginMetrics['samples'][number];
export type PluginCanary = NonNullable<Plugin['canary']>;
export type TrackMetrics = NonNullable<PluginMetrics['tracks']>[number];
export type CanaryStart = RequestBody<'/api/plugins/{name}/canary', 'post'>;
export type Backups = Answer<'/api/backups', 'get'>;
export type BackupJob = Backups['backups'][number];
export type BackupRequest = RequestBody<'/api/backups', 'post'>;
export type Mirror = Answer<'/api/mirror', 'get'>;
export type MirrorChange = RequestBody<'/api/mirror', 'put'>;
export type MirrorMode = NonNullable<MirrorChange['mode']>;
export type PrefixRoutes = Answer<'/api/routes', 'get'>;
export type PrefixRoute = NonNullable<PrefixRoutes['routes']>[number];
export type ProxyRouting = NonNullable<PrefixRoutes['proxies']>[number];
export type PrefixRouteChange = RequestBody<'/api/routes', 'put'>['routes'][number];
export type CommandLog = Answer<'/api/commandlog', 'get'>;
export type CommandLogType = CommandLog['type'];
export type CommandLogEntry = CommandLog['entries'][number];
export type CommandLogSettings = CommandLog['settings'][number];
export type Token = Answer<'/api/tokens', 'get'>[number];
export type CreatedToken = Answer<'/api/tokens', 'post'>;
