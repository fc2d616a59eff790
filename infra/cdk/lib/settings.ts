// The app's settings: CDK context values (`cdk deploy -c clusterName=prod`, or the "context" block
// of cdk.json), checked at synth time so a bad value stops `cdk synth` with the key's name rather
// than failing half-way through a deployment. They mirror the SAM template's parameters
// (infra/sam/template.yaml).

import * as fs from 'node:fs';
import * as path from 'node:path';

export type ForwarderIdentity = 'PodIdentity' | 'IRSA';

export interface DovetailSettings {
  /** The EKS cluster: tags, table partition, access entries. */
  readonly clusterName: string;
  /** An existing node role, by name; undefined: the stack creates DovetailNodeRole-<cluster>. */
  readonly nodeRoleName?: string;
  /** For an existing node role: create the same-named instance profile. */
  readonly createNodeInstanceProfile: boolean;
  /** For an existing node role: create its EC2_LINUX access entry. */
  readonly createNodeAccessEntry: boolean;
  readonly forwarderIdentity: ForwarderIdentity;
  readonly forwarderNamespace: string;
  readonly forwarderServiceAccount: string;
  /** The functions' LoggingConfig ApplicationLogLevel (AWS_LAMBDA_LOG_LEVEL in the functions). */
  readonly applicationLogLevel: ApplicationLogLevel;
  /** RUST_LOG of the functions: a tracing filter by module under the level; '' for none. */
  readonly logFilter: string;
  readonly logRetentionDays: number;
  readonly pricingRegion: string;
  /** Node repair for every NodePool (DOVETAIL_NODE_REPAIR). */
  readonly nodeRepair: boolean;
  /** What a NodePool's minValues means (DOVETAIL_MIN_VALUES_POLICY). */
  readonly minValuesPolicy: MinValuesPolicy;
  /** Cluster-wide cost limit in USD per hour ('' for none; DOVETAIL_COST_LIMIT). */
  readonly costLimitPerHour: string;
  /** SNS topic the alarms notify; undefined: the alarms have no actions. */
  readonly alarmTopicArn?: string;
  /** Alarm when pods stay pending this many minutes. */
  readonly pendingPodsAlarmMinutes: number;
  /** Alarm when launch failures exceed this percentage of launch attempts. */
  readonly launchFailureAlarmPercent: number;
  /** Where `cargo lambda build` left `<binary>/bootstrap` for each function. */
  readonly lambdaDir: string;
}

/** CloudWatch Logs' allowed retention periods, in days. */
export const RETENTION_DAYS = [
  1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653,
];
/** Lambda's application log levels (LoggingConfig ApplicationLogLevel). */
export const APPLICATION_LOG_LEVELS = ['TRACE', 'DEBUG', 'INFO', 'WARN', 'ERROR', 'FATAL'] as const;
export type ApplicationLogLevel = (typeof APPLICATION_LOG_LEVELS)[number];
/** Regions with a Price List API endpoint. */
export const PRICING_REGIONS = ['us-east-1', 'eu-central-1', 'ap-south-1', 'cn-northwest-1'];
/** Karpenter's --min-values-policy values. */
export const MIN_VALUES_POLICIES = ['Strict', 'BestEffort'] as const;
export type MinValuesPolicy = (typeof MIN_VALUES_POLICIES)[number];
/** The binaries `cargo lambda build --release --arm64` makes, one per function. */
export const BINARIES = ['dovetail-provisioner', 'dovetail-interruption', 'dovetail-sweeper'] as const;

const CLUSTER_NAME = /^[0-9A-Za-z][A-Za-z0-9_-]{0,99}$/;
const ROLE_NAME = /^[\w+=,.@-]{1,64}$/;
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-.a-z0-9]*[a-z0-9])?$/;
const COST_PER_HOUR = /^[0-9]+(\.[0-9]+)?$/;
const SNS_TOPIC_ARN = /^arn:aws[a-z-]*:sns:[a-z0-9-]+:[0-9]{12}:[A-Za-z0-9_.-]+$/;

/** A setting or an input the user must fix; the app prints its message without a stack trace. */
export class SettingsError extends Error {}

/** Reads one context value; undefined when unset or empty. */
export type Lookup = (key: string) => unknown;

/**
 * The settings from context values, or a SettingsError naming the first bad key. `env` supplies
 * DOVETAIL_LAMBDA_DIR and CARGO_TARGET_DIR; `cdkDir` is the directory of cdk.json (relative
 * defaults are taken from there, not from wherever `cdk` was started).
 */
export function readSettings(get: Lookup, env: NodeJS.ProcessEnv, cdkDir: string): DovetailSettings {
  const text = (key: string, fallback?: string): string | undefined => {
    const value = get(key);
    if (value === undefined || value === null || value === '') return fallback;
    if (typeof value !== 'string') throw new SettingsError(`context ${key}: expected a string, got ${JSON.stringify(value)}`);
    return value;
  };
  const matching = (key: string, pattern: RegExp, fallback?: string): string | undefined => {
    const value = text(key, fallback);
    if (value !== undefined && !pattern.test(value)) {
      throw new SettingsError(`context ${key}=${JSON.stringify(value)}: must match ${pattern}`);
    }
    return value;
  };
  const flag = (key: string, fallback: boolean): boolean => {
    const value = get(key);
    if (value === undefined || value === null || value === '') return fallback;
    if (value === true || value === 'true') return true;
    if (value === false || value === 'false') return false;
    throw new SettingsError(`context ${key}=${JSON.stringify(value)}: expected true or false`);
  };
  const oneOf = <T extends string | number>(key: string, allowed: readonly T[], fallback: T): T => {
    const raw = get(key);
    if (raw === undefined || raw === null || raw === '') return fallback;
    // `-c key=30` arrives as a string, cdk.json's 30 as a number.
    const found = allowed.find((a) => String(a) === String(raw));
    if (found === undefined) {
      throw new SettingsError(`context ${key}=${JSON.stringify(raw)}: must be one of ${allowed.join(', ')}`);
    }
    return found;
  };

  const whole = (key: string, min: number, max: number, fallback: number): number => {
    const raw = get(key);
    if (raw === undefined || raw === null || raw === '') return fallback;
    const value = Number(raw);
    if (!Number.isInteger(value) || value < min || value > max) {
      throw new SettingsError(`context ${key}=${JSON.stringify(raw)}: must be a whole number from ${min} to ${max}`);
    }
    return value;
  };

  // An amount of USD, or '' when unset. `-c key=250` arrives as a string, cdk.json's 250 as a number.
  const dollars = (key: string): string => {
    const raw = get(key);
    if (raw === undefined || raw === null || raw === '') return '';
    const value = String(raw);
    if ((typeof raw !== 'string' && typeof raw !== 'number') || !COST_PER_HOUR.test(value)) {
      throw new SettingsError(`context ${key}=${JSON.stringify(raw)}: must be a non-negative number of USD per hour, e.g. 250 or 12.5`);
    }
    return value;
  };

  const clusterName = matching('clusterName', CLUSTER_NAME);
  if (clusterName === undefined) {
    throw new SettingsError('context clusterName is required: the EKS cluster to scale (cdk synth -c clusterName=<name>)');
  }
  const nodeRoleName = matching('nodeRoleName', ROLE_NAME);
  if (nodeRoleName === undefined && `DovetailNodeRole-${clusterName}`.length > 64) {
    throw new SettingsError(
      `context clusterName=${clusterName}: DovetailNodeRole-${clusterName} is longer than IAM's 64 characters; ` +
        'pass -c nodeRoleName=<role> for an existing node role',
    );
  }
  return {
    clusterName,
    nodeRoleName,
    createNodeInstanceProfile: flag('createNodeInstanceProfile', true),
    createNodeAccessEntry: flag('createNodeAccessEntry', true),
    forwarderIdentity: oneOf<ForwarderIdentity>('forwarderIdentity', ['PodIdentity', 'IRSA'], 'PodIdentity'),
    forwarderNamespace: matching('forwarderNamespace', DNS_LABEL, 'dovetail')!,
    forwarderServiceAccount: matching('forwarderServiceAccount', DNS_SUBDOMAIN, 'dovetail-forwarder')!,
    applicationLogLevel: oneOf<ApplicationLogLevel>('applicationLogLevel', APPLICATION_LOG_LEVELS, 'INFO'),
    logFilter: text('logFilter', '')!,
    logRetentionDays: oneOf('logRetentionDays', RETENTION_DAYS, 30),
    pricingRegion: oneOf('pricingRegion', PRICING_REGIONS, 'us-east-1'),
    nodeRepair: flag('nodeRepair', false),
    minValuesPolicy: oneOf<MinValuesPolicy>('minValuesPolicy', MIN_VALUES_POLICIES, 'Strict'),
    costLimitPerHour: dollars('costLimitPerHour'),
    alarmTopicArn: matching('alarmTopicArn', SNS_TOPIC_ARN),
    pendingPodsAlarmMinutes: whole('pendingPodsAlarmMinutes', 2, 1440, 10),
    launchFailureAlarmPercent: whole('launchFailureAlarmPercent', 1, 100, 50),
    lambdaDir: lambdaDir(text('lambdaDir'), env, cdkDir),
  };
}

/**
 * Where the functions' `bootstrap` files are: context lambdaDir, else DOVETAIL_LAMBDA_DIR, else
 * $CARGO_TARGET_DIR/lambda, else the workspace's target/lambda (../../target/lambda from here).
 */
export function lambdaDir(fromContext: string | undefined, env: NodeJS.ProcessEnv, cdkDir: string): string {
  const chosen =
    fromContext ??
    (env.DOVETAIL_LAMBDA_DIR || undefined) ??
    (env.CARGO_TARGET_DIR ? path.join(env.CARGO_TARGET_DIR, 'lambda') : undefined) ??
    path.join('..', '..', 'target', 'lambda');
  return path.resolve(cdkDir, chosen);
}

/** ELF e_machine values: what a bootstrap was built for. */
const MACHINES: Record<number, string> = { 0x03: 'x86 (32-bit)', 0x3e: 'x86-64', 0xb7: 'arm64 (aarch64)' };
const AARCH64 = 0xb7;

/**
 * The directory holding `binary`'s bootstrap, or a SettingsError saying how to build it. The functions
 * run on Graviton, so a bootstrap must be an arm64 ELF executable: `cargo lambda build --release`
 * without `--arm64` writes an x86-64 one to the same path, which Lambda would only refuse at the
 * first invocation.
 */
export function functionAsset(dir: string, binary: string): string {
  const assetDir = path.join(dir, binary);
  const bootstrap = path.join(assetDir, 'bootstrap');
  const build =
    'build the functions with `cargo lambda build --release --arm64` in the workspace root ' +
    '(or point DOVETAIL_LAMBDA_DIR / -c lambdaDir=<dir> at the directory holding ' +
    `${BINARIES.map((b) => `${b}/bootstrap`).join(', ')})`;
  let header: Buffer;
  try {
    const fd = fs.openSync(bootstrap, 'r');
    try {
      header = Buffer.alloc(20);
      header = header.subarray(0, fs.readSync(fd, header, 0, 20, 0));
    } finally {
      fs.closeSync(fd);
    }
  } catch (e) {
    const reason = (e as NodeJS.ErrnoException).code === 'ENOENT' ? 'does not exist' : `cannot be read (${e})`;
    throw new SettingsError(`${bootstrap} ${reason}: ${build}`);
  }
  const isElf = header.length === 20 && header.subarray(0, 4).equals(Buffer.from([0x7f, 0x45, 0x4c, 0x46]));
  if (!isElf) {
    throw new SettingsError(`${bootstrap} is not an ELF executable: ${build}`);
  }
  // e_machine: 2 bytes at offset 18, in the file's byte order (EI_DATA: 1 little-endian, 2 big).
  const machine = header[5] === 2 ? header.readUInt16BE(18) : header.readUInt16LE(18);
  if (machine !== AARCH64) {
    const what = MACHINES[machine] ?? `machine ${machine}`;
    throw new SettingsError(`${bootstrap} is built for ${what}, but the functions run on arm64: ${build}`);
  }
  return assetDir;
}
