#!/usr/bin/env node
// The CDK app: one Dovetail stack for the cluster named by `-c clusterName=<name>`, checked by
// cdk-nag's AWS Solutions rules (a finding not acknowledged in the stack fails the synth).

import * as path from 'node:path';
import { App, Validations } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';

import { DovetailStack } from '../lib/dovetail-stack';
import { readSettings, SettingsError } from '../lib/settings';

// dist/bin/dovetail.js -> infra/cdk, where cdk.json is.
const cdkDir = path.resolve(__dirname, '..', '..');
const app = new App();
try {
  const settings = readSettings((key) => app.node.tryGetContext(key), process.env, cdkDir);
  new DovetailStack(app, `Dovetail-${settings.clusterName}`, {
    description: `Dovetail: event-driven node autoscaling for EKS cluster ${settings.clusterName}`,
    settings,
  });
} catch (e) {
  // The user's to fix (a context value, an unbuilt function): the message, not a stack trace.
  if (!(e instanceof SettingsError)) throw e;
  console.error(`dovetail: ${e.message}`);
  process.exit(1);
}
Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
