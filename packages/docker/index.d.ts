export * from 'native-sandbox/docker';
